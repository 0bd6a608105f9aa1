package todoist

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidybot/tidybot/agent"
)

// Limits checked before anything is sent.
const (
	maxCommands       = 100 // commands per /sync request
	maxContent        = 500
	maxDescription    = 16383
	maxDueString      = 150
	maxProjectName    = 120
	maxLabelName      = 128
	maxSectionName    = 2048
	invalidTempIDCode = 15 // sync error_code "Invalid temporary id"
)

// command is one /sync command.
type command struct {
	Type   string         `json:"type"`
	UUID   string         `json:"uuid"`
	TempID string         `json:"temp_id,omitempty"`
	Args   map[string]any `json:"args"`
}

// commandsBody is the JSON body {"commands":[…]} of encoded commands.
func commandsBody(cmds []json.RawMessage) []byte {
	n := len(`{"commands":[]}`) + len(cmds)
	for _, c := range cmds {
		n += len(c)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"commands":[`...)
	for i, c := range cmds {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, c...)
	}
	return append(b, "]}"...)
}

// Apply implements agent.Tasks. Each Write becomes the /sync command its
// Kind names; the batch goes out in requests of at most 100 commands and
// 1 MiB, in order, and a later write may name an earlier one's TempID as its ID,
// ProjectID or SectionID, within a request or across requests.
//
// The Write's UUID is the command's uuid, the idempotency key: the caller
// must choose it (agent.NewUUID) and keep it, so that re-sending the batch
// after a crash or a timeout applies each write once. A Write without a
// UUID gets a fresh one here, reported in its WriteResult, and is then not
// safe to re-send. A create without a TempID gets one, so that its NewID
// can be reported.
//
// Before any request, every write is checked (an empty batch, empty or
// too-long content, a priority other than p1–p4, a missing id or name, a
// move without exactly one destination); a bad write fails the whole call
// with an agent.ErrInvalid naming it, and nothing is sent. A command that
// Todoist rejects fails alone: its WriteResult.Err is an *agent.Error
// naming the id it could not use ("no task with id X").
func (c *Client) Apply(ctx context.Context, writes []agent.Write) ([]agent.WriteResult, error) {
	ws := make([]agent.Write, len(writes))
	copy(ws, writes)
	for i := range ws {
		if ws[i].UUID == "" {
			ws[i].UUID = agent.NewUUID()
		}
		if ws[i].TempID == "" && isCreate(ws[i].Kind) {
			ws[i].TempID = agent.NewUUID()
		}
	}
	declared, err := validate(ws)
	if err != nil {
		return nil, fmt.Errorf("todoist: apply %d writes: %w", len(ws), err)
	}

	results := make([]agent.WriteResult, len(ws))
	for i, w := range ws {
		results[i].UUID = w.UUID
	}
	b := &batch{c: c, ws: ws, results: results, declared: declared, done: make([]bool, len(ws)),
		resolved: map[string]string{}, failed: map[string]bool{}}
	for start := 0; start < len(ws); {
		sent, cmds, end := b.chunk(start)
		if len(sent) > 0 {
			if err := b.send(ctx, sent, cmds); err != nil {
				for i := start; i < len(ws); i++ {
					if results[i].Err == nil && !b.done[i] {
						results[i].Err = err
					}
				}
				return results, fmt.Errorf("todoist: apply writes %d–%d of %d: %w", start+1, end, len(ws), err)
			}
		}
		start = end
	}
	return results, nil
}

// maxRequestBody is the largest POST body Todoist takes: "There is a
// 1 MiB HTTP request body limit on POST requests"
// (developer.todoist.com/api/v1 #tag/Request-limits).
const maxRequestBody = 1 << 20

// batch is one Apply: the writes, their results, and the temp ids met so
// far.
type batch struct {
	c        *Client
	ws       []agent.Write
	results  []agent.WriteResult
	done     []bool            // Todoist confirmed the write at this index
	declared map[string]int    // temp id → index of the write that declares it
	resolved map[string]string // temp id → real id, from earlier requests
	failed   map[string]bool   // temp ids whose create failed
}

// fail records a write's error; a failed create's temp id fails the
// writes that use it later.
func (b *batch) fail(i int, err error) {
	b.results[i].Err = err
	if t := b.ws[i].TempID; t != "" {
		b.failed[t] = true
	}
}

// chunk picks the writes of the next request from start: at most 100
// commands and at most maxRequestBody bytes. It returns their indexes,
// their encoded commands and where the next request starts.
func (b *batch) chunk(start int) (sent []int, cmds []json.RawMessage, end int) {
	size := len(`{"commands":[]}`)
	end = start
	for i := start; i < len(b.ws) && len(sent) < maxCommands; i++ {
		w, err := substitute(b.ws[i], start, b.declared, b.resolved, b.failed)
		if err != nil {
			b.fail(i, err)
			end = i + 1
			continue
		}
		raw, _ := json.Marshal(toCommand(w))
		add := len(raw)
		if len(sent) > 0 {
			add++ // the comma
		}
		if size+add > maxRequestBody {
			if len(sent) > 0 {
				break
			}
			b.fail(i, invalid("%s is larger than Todoist's 1 MiB request limit; shorten it", describe(w)))
			end = i + 1
			continue
		}
		size += add
		sent = append(sent, i)
		cmds = append(cmds, raw)
		end = i + 1
	}
	return sent, cmds, end
}

// send sends the writes at indexes sent (one request) and records what
// became of each. Commands that failed asking to wait (error_extra.retry_after,
// a rate limit, a server error), and those after them that failed too,
// are sent again after the wait, within the client's retry budget; a
// create that Todoist reports done without a new id (a command re-sent
// after a lost answer) gets its id by reading, and the commands that
// could not use its temp id are sent again with the real one.
func (b *batch) send(ctx context.Context, sent []int, cmds []json.RawMessage) error {
	var waited time.Duration
	for round := 0; ; round++ {
		subs := make(map[int]agent.Write, len(sent))
		if round > 0 {
			cmds = make([]json.RawMessage, len(sent))
		}
		for k, i := range sent {
			// Every temp id resolved so far is replaced; the others are
			// declared in this request, for Todoist to resolve.
			w, err := substitute(b.ws[i], len(b.ws), b.declared, b.resolved, b.failed)
			if err != nil {
				w = b.ws[i] // a failed temp id: Todoist will say so
			}
			subs[i] = w
			if round > 0 {
				cmds[k], _ = json.Marshal(toCommand(w))
			}
		}
		body := commandsBody(cmds)
		var resp syncResponse
		if err := b.c.do(ctx, call{method: http.MethodPost, path: "/sync", body: body}, &resp); err != nil {
			return err
		}
		again, wait, unmapped, deferred := b.record(&resp, sent, subs, round)
		if len(unmapped) > 0 {
			if err := b.findCreated(ctx, unmapped); err != nil {
				return err
			}
			// Commands that could not use a temp id found only now.
			found := map[string]bool{}
			for t := range unmapped {
				found[t] = b.resolved[t] != ""
			}
			for _, i := range sent {
				if ae := deferred[i]; ae != nil && isTempIDError(ae) && b.results[i].Err != nil && usesAny(b.ws[i], found) && !slices.Contains(again, i) {
					again = append(again, i)
				}
			}
			slices.Sort(again)
		}
		if len(again) == 0 {
			return nil
		}
		if round >= maxCommandRounds || waited+wait > b.c.maxRetryWait {
			for _, i := range again {
				b.fail(i, commandError(b.ws[i], deferred[i], b.declared))
			}
			return nil
		}
		if wait > 0 {
			b.c.log.DebugContext(ctx, "todoist: re-sending commands", slog.Int("commands", len(again)), slog.Duration("wait", wait))
			if err := b.c.sleep(ctx, wait); err != nil {
				return err
			}
			waited += wait
		}
		for _, i := range again {
			b.results[i].Err = nil
		}
		sent = again
	}
}

// record reads what became of the commands at sent (subs: as sent) from
// resp. It returns the ones to send again and after how long, the creates
// done without a new id (temp id → index), and the error of each command
// that failed.
func (b *batch) record(resp *syncResponse, sent []int, subs map[int]agent.Write, round int) (again []int, wait time.Duration, unmapped map[string]int, deferred map[int]*apiError) {
	unmapped, deferred = map[string]int{}, map[int]*apiError{}
	for _, i := range sent {
		w := subs[i]
		raw, ok := resp.SyncStatus[w.UUID]
		if !ok {
			b.fail(i, &agent.Error{Code: agent.ErrServer, Message: fmt.Sprintf("Todoist did not report on %s; re-sending the same batch is safe", describe(w))})
			continue
		}
		ae := commandStatus(raw)
		if ae == nil {
			b.results[i].Err = nil
			b.done[i] = true
			delete(b.failed, w.TempID)
			if w.TempID == "" {
				continue
			}
			if id := resp.TempIDMapping[w.TempID]; id != "" {
				b.results[i].NewID = id
				b.resolved[w.TempID] = id
			} else {
				unmapped[w.TempID] = i
			}
			continue
		}
		// Once one command must wait, every later failed one is re-sent
		// with it: Todoist applies a batch in order, so a later command
		// may have failed only because an earlier one did not run (a
		// temp id it created, a project it moved). A failure that is
		// permanent fails again and is reported when the rounds end.
		if d, ok := b.c.commandWait(ae, round); ok || len(again) > 0 {
			again = append(again, i)
			deferred[i] = ae
			wait = max(wait, d)
			continue
		}
		b.fail(i, commandError(b.ws[i], ae, b.declared))
		deferred[i] = ae
	}
	return again, wait, unmapped, deferred
}

// maxCommandRounds bounds how often send re-sends commands of one request.
const maxCommandRounds = 5

// commandWait reports whether a failed command is worth sending again and
// after how long: one that states a wait (error_extra.retry_after, honoured
// whatever its status), is rate limited, or met a server error.
func (c *Client) commandWait(ae *apiError, round int) (time.Duration, bool) {
	if s := ae.retryAfter(); s > 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if ae.Tag == "LIMITS_REACHED" || ae.HTTPCode == http.StatusTooManyRequests || ae.HTTPCode >= 500 {
		return c.backoff(round), true
	}
	return 0, false
}

// usesAny reports whether w refers to one of the temp ids marked true.
func usesAny(w agent.Write, temp map[string]bool) bool {
	for _, id := range []string{w.ID, w.ProjectID, w.SectionID, w.ParentID} {
		if temp[id] {
			return true
		}
	}
	return false
}

// commandStatus returns nil for an "ok" status, else the error object.
func commandStatus(raw json.RawMessage) *apiError {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "ok" {
			return nil
		}
		return &apiError{Message: s}
	}
	var ae apiError
	if err := json.Unmarshal(raw, &ae); err != nil {
		return &apiError{Message: "unreadable status " + string(raw)}
	}
	return &ae
}

// validate checks every write before anything is sent and returns where
// each temp id is declared.
func validate(ws []agent.Write) (map[string]int, error) {
	if len(ws) == 0 {
		return nil, invalid("empty batch: there is nothing to write")
	}
	declared := map[string]int{}
	uuids := make(map[string]bool, len(ws))
	for i, w := range ws {
		bad := func(format string, args ...any) error {
			return invalid("write %d of %d (%s): %s; nothing was sent", i+1, len(ws), w.Kind, fmt.Sprintf(format, args...))
		}
		if uuids[w.UUID] {
			return nil, bad("uuid %s is used twice in the batch", w.UUID)
		}
		uuids[w.UUID] = true
		if w.TempID != "" {
			if _, dup := declared[w.TempID]; dup {
				return nil, bad("temp id %s is used twice in the batch", w.TempID)
			}
			declared[w.TempID] = i
		}
		k, ok := kinds[w.Kind]
		if !ok {
			return nil, bad("unknown kind of write %q", w.Kind)
		}
		if k.id != "" && strings.TrimSpace(w.ID) == "" {
			return nil, bad("empty %s id", k.id)
		}
		if k.check != nil {
			if err := k.check(bad, w); err != nil {
				return nil, err
			}
		}
	}
	return declared, nil
}

func checkName(bad func(string, ...any) error, what, name string, limit int) error {
	name = strings.TrimSpace(name)
	if name == "" {
		return bad("empty %s name", what)
	}
	if n := utf8.RuneCountInString(name); n > limit {
		return bad("the %s name is %d characters long; at most %d are allowed", what, n, limit)
	}
	return nil
}

// checkTask checks the task fields of an item_add or item_update.
func checkTask(bad func(string, ...any) error, w agent.Write) error {
	if w.Content != nil {
		c := strings.TrimSpace(*w.Content)
		if c == "" {
			return bad("the task content is empty; give each task a title")
		}
		if n := utf8.RuneCountInString(c); n > maxContent {
			return bad("the task content is %d characters long; at most %d are allowed (put the rest in the description)", n, maxContent)
		}
	}
	if w.Description != nil && utf8.RuneCountInString(*w.Description) > maxDescription {
		return bad("the description is longer than %d characters", maxDescription)
	}
	if w.DueString != nil && utf8.RuneCountInString(*w.DueString) > maxDueString {
		return bad("the due string is longer than %d characters", maxDueString)
	}
	if w.Due != nil {
		if err := checkDue(bad, w.Due); err != nil {
			return err
		}
	}
	if w.Priority != "" && !w.Priority.Valid() {
		return bad("priority %q is not one of p1 (urgent), p2, p3, p4 (none)", w.Priority)
	}
	if w.Labels != nil {
		for _, l := range *w.Labels {
			if strings.TrimSpace(l) == "" {
				return bad("empty label name")
			}
		}
	}
	return nil
}

// checkDue checks a due date to set as stored: one of the three forms of
// date Todoist documents (developer.todoist.com/api/v1 #tag/Due-dates).
func checkDue(bad func(string, ...any) error, d *agent.Due) error {
	for _, layout := range []string{time.DateOnly, "2006-01-02T15:04:05", time.RFC3339Nano} {
		if _, err := time.Parse(layout, d.Date); err == nil {
			return nil
		}
	}
	return bad("due date %q is not YYYY-MM-DD, YYYY-MM-DDTHH:MM:SS or an RFC 3339 time in UTC", d.Date)
}

// dueArg is a due date set as stored ("Create or update due date from a
// date object", developer.todoist.com/api/v1 #tag/Due-dates): the date,
// the zone of a fixed time, and for a recurring date its string, since a
// date alone "does not allow you to create recurring due dates", with the
// lang the string is read in.
func dueArg(d *agent.Due) map[string]any {
	m := map[string]any{"date": d.Date}
	if d.Timezone != "" {
		m["timezone"] = d.Timezone
	}
	if d.IsRecurring && d.String != "" {
		m["string"] = d.String
		if d.Lang != "" {
			// The language the string is read in.
			m["lang"] = d.Lang
		}
	}
	return m
}

// substitute replaces the temp ids that earlier requests of the batch
// resolved with their real ids. A temp id whose create failed fails this
// write without sending it. Temp ids declared in the same request are left
// for Todoist to resolve.
func substitute(w agent.Write, chunkStart int, declared map[string]int, resolved map[string]string, failed map[string]bool) (agent.Write, error) {
	orig := w
	for _, f := range []struct {
		p    *string
		kind string
	}{{&w.ID, idKind(w.Kind)}, {&w.ProjectID, "project"}, {&w.SectionID, "section"}, {&w.ParentID, "project"}} {
		v := *f.p
		if at, ok := declared[v]; !ok || at >= chunkStart {
			continue
		}
		if real, ok := resolved[v]; ok {
			*f.p = real
			continue
		}
		if failed[v] {
			return orig, &agent.Error{Code: agent.ErrNotFound,
				Message: fmt.Sprintf("no %s with id %s: the write that was to create it failed", f.kind, v)}
		}
	}
	return w, nil
}

// taskArgs adds the fields item_add and item_update share. In an update,
// an empty or "no date" due string removes the due date (due: null).
func taskArgs(args map[string]any, w agent.Write, update bool) {
	if w.Content != nil {
		args["content"] = strings.TrimSpace(*w.Content)
	}
	if w.Description != nil {
		args["description"] = *w.Description
	}
	if w.Due != nil {
		args["due"] = dueArg(w.Due)
	} else if w.DueString != nil {
		switch s := strings.TrimSpace(*w.DueString); {
		case s == "" || strings.EqualFold(s, "no date"):
			if update {
				args["due"] = nil
			}
		default:
			args["due"] = map[string]string{"string": s}
		}
	}
	if p, ok := apiPriority(w.Priority); ok {
		args["priority"] = p
	}
	if w.Labels != nil {
		ls := *w.Labels
		if ls == nil {
			ls = []string{}
		}
		args["labels"] = ls
	}
}

// notFoundTags maps the error_tag of a command that names a missing
// object to that object's kind. /sync names the kind in the tag
// (ITEM_NOT_FOUND, …; REST says NOT_FOUND), and the error object's other
// fields are optional (developer.todoist.com/api/v1 #tag/Sync/Overview,
// "Response / Error": "The error object may contain the following
// fields"), so the tag is read first and http_code only after it.
var notFoundTags = map[string]string{
	"ITEM_NOT_FOUND":    "task",
	"TASK_NOT_FOUND":    "task",
	"PROJECT_NOT_FOUND": "project",
	"SECTION_NOT_FOUND": "section",
	"LABEL_NOT_FOUND":   "label",
	"NOT_FOUND":         "",
}

// isTempIDError reports an "Invalid temporary id" error: error_code 15
// in the docs' example, INVALID_TEMP_ID as a tag.
func isTempIDError(ae *apiError) bool {
	return ae.Code == invalidTempIDCode || ae.Tag == "INVALID_TEMP_ID" || ae.Tag == "INVALID_TEMPID"
}

// commandError maps a failed command to an *agent.Error naming what the
// model sent (w holds the caller's ids, temp ids included). The error
// tag decides where there is one; http_code is the fallback.
func commandError(w agent.Write, ae *apiError, declared map[string]int) *agent.Error {
	tagKind, tagNotFound := notFoundTags[ae.Tag]
	switch {
	case ae.Tag == "LIMITS_REACHED" || ae.HTTPCode == http.StatusTooManyRequests:
		return &agent.Error{Code: agent.ErrRateLimited, Message: "Todoist's rate limit is reached; re-send this write later", Err: ae}
	case isPlanLimit(ae):
		return &agent.Error{Code: agent.ErrPlanLimit, Message: planLimitMessage(ae), Err: ae}
	case tagNotFound || isTempIDError(ae) || ae.Tag == "" && ae.HTTPCode == http.StatusNotFound:
		kind, id := missingObject(w, ae, tagKind, declared)
		if id == "" {
			return &agent.Error{Code: agent.ErrNotFound, Message: fmt.Sprintf("Todoist cannot find what %s refers to (%s)", describe(w), orDefault(ae.Message, "not found")), Err: ae}
		}
		return &agent.Error{Code: agent.ErrNotFound, Message: fmt.Sprintf("no %s with id %s", kind, id), Err: ae}
	case ae.Tag == insufficientScope:
		return &agent.Error{Code: agent.ErrForbidden, Message: scopeMessage(scopeAction(w.Kind), kinds[w.Kind].scope), Err: ae}
	case strings.HasPrefix(ae.Tag, "AUTH_") || ae.HTTPCode == http.StatusUnauthorized:
		return &agent.Error{Code: agent.ErrUnauthorized, Message: "Todoist rejected the token: check TODOIST_TOKEN", Err: ae}
	case ae.HTTPCode == http.StatusForbidden:
		return &agent.Error{Code: agent.ErrForbidden, Message: fmt.Sprintf("Todoist does not allow %s (%s)", describe(w), orDefault(ae.Message, "forbidden")), Err: ae}
	case ae.HTTPCode == http.StatusNotFound:
		kind, id := missingObject(w, ae, "", declared)
		if id == "" {
			return &agent.Error{Code: agent.ErrNotFound, Message: fmt.Sprintf("Todoist cannot find what %s refers to (%s)", describe(w), orDefault(ae.Message, "not found")), Err: ae}
		}
		return &agent.Error{Code: agent.ErrNotFound, Message: fmt.Sprintf("no %s with id %s", kind, id), Err: ae}
	case ae.HTTPCode >= 500:
		return &agent.Error{Code: agent.ErrServer, Message: fmt.Sprintf("Todoist failed on %s; re-sending the same batch is safe", describe(w)), Err: ae}
	}
	msg := orDefault(ae.Message, "invalid")
	if arg := ae.argument(); arg != "" {
		msg += " (argument " + arg + ")"
	}
	return &agent.Error{Code: agent.ErrInvalid, Message: fmt.Sprintf("Todoist rejected %s: %s", describe(w), msg), Err: ae}
}

// missingObject works out which object a not-found command error is about:
// from the argument the server names, else from the kind its tag names,
// else from the words of its message, else from the kind of write.
func missingObject(w agent.Write, ae *apiError, tagKind string, declared map[string]int) (kind, id string) {
	byArg := map[string]struct{ kind, id string }{
		"id":         {idKind(w.Kind), w.ID},
		"project_id": {"project", w.ProjectID},
		"section_id": {"section", w.SectionID},
		"parent_id":  {"project", w.ParentID},
	}
	if a, ok := byArg[ae.argument()]; ok && a.id != "" {
		return a.kind, a.id
	}
	if isTempIDError(ae) {
		// The bad id is a temp id of the batch, or else one that does not
		// even look like a Todoist id.
		for _, arg := range []string{"id", "project_id", "section_id", "parent_id"} {
			if a := byArg[arg]; a.id != "" {
				if _, ok := declared[a.id]; ok || !looksLikeID(a.id) {
					return a.kind, a.id
				}
			}
		}
	}
	switch tagKind {
	case "task":
		if w.ID != "" && idKind(w.Kind) == "task" {
			return "task", w.ID
		}
	case "section":
		if w.SectionID != "" {
			return "section", w.SectionID
		}
	case "label":
		if w.ID != "" && idKind(w.Kind) == "label" {
			return "label", w.ID
		}
	case "project":
		if id, ok := projectOf(w); ok {
			return "project", id
		}
	}
	msg := strings.ToLower(ae.Message)
	switch {
	case strings.Contains(msg, "section") && w.SectionID != "":
		return "section", w.SectionID
	case strings.Contains(msg, "project"):
		if id, ok := projectOf(w); ok {
			return "project", id
		}
	case strings.Contains(msg, "item") || strings.Contains(msg, "task"):
		if w.ID != "" {
			return "task", w.ID
		}
	}
	if f := kinds[w.Kind].missing; f != nil {
		return f(w)
	}
	return idKind(w.Kind), w.ID
}

// projectOf is the project a not-found error about a project means for
// w: the one it deletes, the parent of the one it adds, or the one it
// names; ok is false when w names none.
func projectOf(w agent.Write) (id string, ok bool) {
	switch {
	case w.Kind == agent.DeleteProject:
		return w.ID, true
	case w.Kind == agent.AddProject:
		return w.ParentID, true
	case w.ProjectID != "":
		return w.ProjectID, true
	}
	return "", false
}

// looksLikeID reports whether s has the shape of a v1 id: alphanumeric
// (16 characters for tasks and projects, digits for some older objects).
func looksLikeID(s string) bool {
	if len(s) < 6 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}
