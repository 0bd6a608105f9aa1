// Package todoisttest is an in-memory fake of the Todoist API v1 on
// net/http/httptest, for tests, demos and benchmarks that run the real
// client (agent/todoist) end to end without a network or an account.
//
// The fake speaks the wire protocol of API v1 as Todoist documents it
// (developer.todoist.com/api/v1):
//
//   - Bearer auth; errors in v1's JSON shape
//     {"error","error_code","error_tag","http_code","error_extra"};
//   - 16-character opaque alphanumeric ids (labels: numeric strings) and an
//     Inbox project (inbox_project: true);
//   - GET /projects, /projects/{id}, /tasks (project_id, section_id,
//     parent_id, label, ids), /tasks/filter?query=, /tasks/{id},
//     /sections?project_id=, /labels, /comments?task_id=|project_id=,
//     /user, all lists paginated with opaque cursors (limit default 50,
//     max 200, 400 above);
//   - POST /sync with a JSON or a form-encoded body: reads by resource_types
//     (projects, sections, labels, items, notes, user, or "all"; "-x"
//     excludes), a full sync for "*", an incremental one for an earlier
//     token, and
//     writes: commands applied in order, uuid dedupe across requests (a
//     re-sent uuid is "ok" without temp_id_mapping), temp_id mapping,
//     per-command errors with HTTP 200 and /sync error tags, 400 above 100
//     commands, 413 above 1 MiB;
//   - 410 with a plain-text body on any /rest/v2 or /sync/v9 path.
//
// /tasks/filter understands a subset of Todoist's filter language:
// #Project, ##Project (with subprojects), /Section, @label (with *
// wildcards), no labels, today, tomorrow, yesterday, overdue, no date,
// recurring, subtask, N days, view all, p1…p4, search: text, and |, &, !
// and parentheses. Anything else is 400 INVALID_SEARCH_QUERY.
//
// Due strings (item_add, item_update) understand today, tomorrow,
// yesterday, weekday names, next <weekday>, next week, next month,
// weekend, in N days/weeks/months, ISO dates, "May 20" style dates, an
// optional "at 5pm"/"17:00" time, and "every …" recurrences; "no date"
// clears. Anything else fails the command with INVALID_DATE_FORMAT. A due
// object with a date takes the date as it is (a string beside it only
// carries a recurrence). "Today" is the user's day in their time zone
// (WithTimezone; /user's tz_info). item_update_date_complete completes one
// occurrence of a recurring task, or with is_forward 0 goes back to the
// occurrence it names. Comments ("notes" on /sync) are added with
// note_add on a task (item_id) or a project and removed with note_delete.
//
// Error codes and tags that Todoist does not document (plan limits,
// unknown commands, bad dates) are plausible stand-ins.
// A sync_token from an earlier read gets an incremental sync: what changed
// since, deleted objects as {"id", "is_deleted": true}; a full sync says
// when its data was made (full_sync_date_utc), and DelayFullSyncs makes
// that data lag behind.
//
// Test hooks: seed data (AddProject, AddSection, AddLabel, AddTask,
// SeedTalkInbox, SeedInbox), read state (Projects, Tasks, Task, Snapshot…),
// count requests (Requests, TotalRequests) and applied commands (Applied),
// inject failures of requests (FailNext, FailAfter) or single commands
// (FailCommands), latency (WithLatency, SetLatency) and delayed full
// syncs (DelayFullSyncs); set the user's time zone (WithTimezone).
// A Server is safe for concurrent use.
package todoisttest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/internal/directhttp"
)

// DefaultToken is the token a Server accepts unless WithToken says
// otherwise.
const DefaultToken = "todoisttest-token-0123456789abcdef"

// apiPrefix is the path of the API v1 base URL.
const apiPrefix = "/api/v1"

// Server is a fake Todoist API v1.
type Server struct {
	// URL is the API base URL, ending in /api/v1: TODOIST_API_URL.
	URL string
	// Token is the API token the server accepts.
	Token string

	srv *httptest.Server
	mux *http.ServeMux
	now func() time.Time

	mu sync.Mutex // protects the fields below and the data in st
	st store
	// rng makes ids; seeded, so a run's ids are reproducible.
	rng       *rand.Rand
	requests  map[string]int
	total     int
	faults    map[string]*fault
	cmdFault  *fault
	latency   map[string]time.Duration
	limits    Limits
	syncCount int
	// fullSyncs counts the /sync reads answered in full (no usable
	// sync_token).
	fullSyncs int
	// tz is the user's time zone (tz_info.timezone): "today" in due
	// strings and filters is the user's day, as in Todoist.
	tz *time.Location
	// tokens maps the sync tokens handed out (the last maxTokens, in
	// tokenOrder) to the state each stands for, for incremental syncs.
	tokens     map[string]State
	tokenOrder []string
	// stale, if set, is what delayed full syncs answer.
	stale *staleFull
	// fullName and email are the user's (GET /user; WithUser).
	fullName, email string
	joined          time.Time // when the account was made (New): the user's joined_at
	// hooks, when set, is where webhooks go (webhook.go).
	hooks *webhooks
}

// Limits are plan limits (Todoist's documented example of a free plan:
// 5 projects, 20 sections, 300 tasks). Zero means no limit. A create past
// a limit fails with HTTP code 403 and an error tag ending in
// _LIMIT_REACHED.
type Limits struct {
	Projects           int
	SectionsPerProject int
	TasksPerProject    int
}

// Fault is an injected failure (see FailNext).
type Fault struct {
	// Status is the HTTP status: 429, 500, 502, 503…
	Status int
	// RetryAfter, if not empty, is sent as the Retry-After header.
	RetryAfter string
	// ExtraRetryAfter, if positive, is sent as error_extra.retry_after
	// (seconds).
	ExtraRetryAfter int
}

type fault struct {
	f    Fault
	skip int // requests served before the fault starts
	left int // < 0: until cleared
}

// Option configures a Server.
type Option func(*Server)

// WithToken sets the accepted token.
func WithToken(token string) Option { return func(s *Server) { s.Token = token } }

// WithLatency delays every request by d before answering (SetLatency
// overrides it per path); a benchmark uses 150 ms to feel like the real
// API.
func WithLatency(d time.Duration) Option { return func(s *Server) { s.latency[""] = d } }

// WithClock sets the clock for timestamps, "today" in filters and due
// strings. The default is time.Now; dates are in the user's time zone
// (WithTimezone).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithTimezone sets the user's time zone (an IANA name; the default is
// UTC). The user resource reports it as tz_info (developer.todoist.com/api/v1
// #tag/Sync/User), and due strings and filters read "today" in it. An
// unknown name panics: it is a mistake in the test.
func WithTimezone(name string) Option {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic("todoisttest: WithTimezone: " + err.Error())
	}
	return func(s *Server) { s.tz = loc }
}

// WithSeed seeds the id generator (the default seed is fixed, so ids are
// the same in every run that makes the same requests in the same order).
func WithSeed(seed uint64) Option {
	return func(s *Server) { s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
}

// WithUser sets the account's user's full_name and email, as GET /user
// reports them (developer.todoist.com/api/v1 #tag/Sync/User; the default
// is "Test User", tester@example.com).
func WithUser(fullName, email string) Option {
	return func(s *Server) { s.fullName, s.email = fullName, email }
}

// WithLimits sets plan limits.
func WithLimits(l Limits) Option { return func(s *Server) { s.limits = l } }

// New starts a fake Todoist with an empty account (just the Inbox). If tb
// is not nil, the server is closed when the test ends; otherwise (a demo,
// a benchmark command) call Close.
func New(tb testing.TB, opts ...Option) *Server {
	s := &Server{
		Token:    DefaultToken,
		now:      time.Now,
		st:       newStore(),
		requests: map[string]int{},
		faults:   map[string]*fault{},
		latency:  map[string]time.Duration{},
		tz:       time.UTC,
		tokens:   map[string]State{},
	}
	WithSeed(1)(s)
	for _, o := range opts {
		o(s)
	}
	s.st.userID = s.newNumericID()
	s.joined = s.now()
	inbox := s.newProject(Project{Name: "Inbox", IsInbox: true, ChildOrder: -1})
	inbox.ChildOrder = 0
	s.st.inboxID = inbox.ID

	s.mux = http.NewServeMux()
	s.routes()
	s.srv = httptest.NewServer(s)
	s.URL = s.srv.URL + apiPrefix
	if tb != nil {
		tb.Cleanup(s.Close)
	}
	return s
}

// wallNow is the user's wall clock (now in their time zone) written as a
// UTC time, so that dates and floating times compare as plain text does.
func (s *Server) wallNow() time.Time {
	n := s.now().In(s.tz)
	return time.Date(n.Year(), n.Month(), n.Day(), n.Hour(), n.Minute(), n.Second(), n.Nanosecond(), time.UTC)
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// Client returns an *http.Client for the server (with a timeout).
func (s *Server) Client() *http.Client {
	c := *s.srv.Client()
	c.Timeout = 30 * time.Second
	return &c
}

// Handler returns the fake as an http.Handler, the same one the server
// serves, for tests that must not use a socket.
func (s *Server) Handler() http.Handler { return s }

// DirectClient returns an *http.Client whose transport calls the handler
// in the calling goroutine, with no socket: inside a testing/synctest
// bubble, where real network I/O is not allowed, the client then runs on
// the bubble's fake clock (injected latency included).
func (s *Server) DirectClient() *http.Client {
	return directhttp.Client(s)
}

// FailNext makes the next n requests to path answer f instead of being
// served. path is relative to the base URL ("/sync", "/tasks",
// "/tasks/filter") or "" for any path; n < 0 fails every request until
// ClearFaults. A path's own fault is used before the any-path one.
func (s *Server) FailNext(path string, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = &fault{f: f, left: n}
}

// FailAfter is FailNext once skip more requests to path have been
// served: a batch whose first /sync request is applied and whose second
// fails.
func (s *Server) FailAfter(path string, skip, n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[path] = &fault{f: f, skip: skip, left: n}
}

// FailCommands makes the next n /sync commands that would run fail on
// their own, in sync_status, with f's status as their http_code (429:
// LIMITS_REACHED) and f.ExtraRetryAfter as error_extra.retry_after; the
// request itself answers 200, as a command error does
// (developer.todoist.com/api/v1 #tag/Sync/Overview, "Response / Error":
// error_extra.retry_after is "Seconds to wait before retrying (for
// rate-limited requests)"). The commands are not applied. n < 0 fails
// every command until ClearFaults.
func (s *Server) FailCommands(n int, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cmdFault = &fault{f: f, left: n}
}

// ClearFaults removes every injected failure.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.faults)
	s.cmdFault = nil
}

// SetLatency delays requests to path (as in FailNext; "" for every path
// without its own) by d before answering. The wait ends early if the
// client gives up.
func (s *Server) SetLatency(path string, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency[path] = d
}

// Requests returns how many requests arrived for path (as in FailNext:
// "/sync", "/tasks", "/projects/<id>"; a path outside /api/v1 counts as
// itself, e.g. "/rest/v2/tasks"), failed ones included.
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// TotalRequests returns how many requests arrived in all.
func (s *Server) TotalRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Applied returns how many times the /sync command with uuid was applied:
// 0 (never sent, or failed) or 1 (a re-sent command is not applied again).
func (s *Server) Applied(uuid string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.applied[uuid]
}

// AppliedCommands returns how many /sync commands were applied in all.
func (s *Server) AppliedCommands() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.st.applied {
		n += c
	}
	return n
}

// SyncRequests returns how many /sync requests were served.
func (s *Server) SyncRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncCount
}

// FullSyncs returns how many /sync reads were answered in full: those
// without a sync_token the fake remembers.
func (s *Server) FullSyncs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fullSyncs
}

// ResetCounters zeroes the request counters (not the record of applied
// uuids, which dedupe needs).
func (s *Server) ResetCounters() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.requests)
	s.total = 0
	s.syncCount = 0
	s.fullSyncs = 0
}

const idAlphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns a fresh 16-character id. Callers hold s.mu (or are New).
func (s *Server) newID() string {
	for {
		var b [16]byte
		for i := range b {
			b[i] = idAlphabet[s.rng.IntN(len(idAlphabet))]
		}
		id := string(b[:])
		if !s.idTaken(id) {
			return id
		}
	}
}

// newNumericID returns a fresh 10-digit id, the shape of label ids.
func (s *Server) newNumericID() string {
	for {
		id := strconv.FormatInt(1_000_000_000+s.rng.Int64N(8_999_999_999), 10)
		if !s.idTaken(id) {
			return id
		}
	}
}

func (s *Server) idTaken(id string) bool {
	return s.st.projectByID[id] != nil || s.st.sectionByID[id] != nil || s.st.taskByID[id] != nil || s.st.labelByID[id] != nil
}

// looksLikeID reports whether id has the shape of a real id (alphanumeric,
// at least 6 characters); anything else is taken for a temp id.
func looksLikeID(id string) bool {
	if len(id) < 6 {
		return false
	}
	for _, r := range id {
		if !strings.ContainsRune(idAlphabet, r) {
			return false
		}
	}
	return true
}

// pathKey is the name a request path is counted and matched under.
func pathKey(p string) string {
	if rest, ok := strings.CutPrefix(p, apiPrefix); ok && (rest == "" || rest[0] == '/') {
		return rest
	}
	return p
}

func isRetired(p string) bool {
	for _, old := range []string{"/rest/v2", "/sync/v9", "/rest/v1", "/sync/v8"} {
		if p == old || strings.HasPrefix(p, old+"/") {
			return true
		}
	}
	return false
}

// ServeHTTP implements http.Handler: it counts the request, waits out the
// injected latency, answers retired paths with 410, checks the token,
// serves an injected failure if one is due, and then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := pathKey(r.URL.Path)
	s.mu.Lock()
	s.requests[key]++
	s.total++
	lat, ok := s.latency[key]
	if !ok {
		lat = s.latency[""]
	}
	s.mu.Unlock()

	if lat > 0 {
		sleepContext(r.Context(), lat)
		if r.Context().Err() != nil {
			return
		}
	}
	if isRetired(r.URL.Path) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusGone)
		fmt.Fprintln(w, "This endpoint is deprecated. Please migrate to the Todoist API v1: https://developer.todoist.com/api/v1/")
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.Token {
		s.writeError(w, http.StatusUnauthorized, 401, "AUTH_INVALID_TOKEN", "Invalid token", nil)
		return
	}
	if f, ok := s.takeFault(key); ok {
		s.writeFault(w, f)
		return
	}
	if r.Method == http.MethodGet && !scopesOf(r).allow(canRead) {
		s.mu.Lock()
		e := s.scopeError()
		s.mu.Unlock()
		writeJSON(w, http.StatusForbidden, e)
		return
	}
	s.mux.ServeHTTP(w, r)
	s.flushWebhooks()
}

func (s *Server) takeFault(key string) (Fault, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range []string{key, ""} {
		f := s.faults[k]
		if f == nil || f.left == 0 {
			continue
		}
		if f.skip > 0 {
			f.skip--
			return Fault{}, false
		}
		if f.left > 0 {
			f.left--
		}
		return f.f, true
	}
	return Fault{}, false
}

func (s *Server) writeFault(w http.ResponseWriter, f Fault) {
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	s.mu.Lock()
	e := s.faultError(f)
	s.mu.Unlock()
	writeJSON(w, f.Status, e)
}

// faultError is the error body of an injected failure, of a whole
// request (FailNext) or of one command (FailCommands). Callers hold s.mu.
func (s *Server) faultError(f Fault) *apiError {
	var extra map[string]any
	if f.ExtraRetryAfter > 0 {
		extra = map[string]any{"retry_after": f.ExtraRetryAfter}
	}
	switch {
	case f.Status == http.StatusTooManyRequests:
		return s.newError(f.Status, 35, "LIMITS_REACHED", "Too many requests. Limits reached. Try again later", extra)
	case f.Status >= 500:
		return s.newError(f.Status, 0, "INTERNAL_SERVER_ERROR", "Service unavailable", extra)
	}
	return s.newError(f.Status, 0, strings.ToUpper(strings.ReplaceAll(http.StatusText(f.Status), " ", "_")), http.StatusText(f.Status), extra)
}

// apiError is v1's error body; it is also a failed command's sync_status.
type apiError struct {
	Error      string         `json:"error"`
	ErrorCode  int            `json:"error_code"`
	ErrorTag   string         `json:"error_tag"`
	HTTPCode   int            `json:"http_code"`
	ErrorExtra map[string]any `json:"error_extra"`
}

// newError builds an error body with a fresh event_id. Callers hold s.mu.
func (s *Server) newError(status, code int, tag, msg string, extra map[string]any) *apiError {
	e := &apiError{Error: msg, ErrorCode: code, ErrorTag: tag, HTTPCode: status, ErrorExtra: map[string]any{}}
	for k, v := range extra {
		e.ErrorExtra[k] = v
	}
	e.ErrorExtra["event_id"] = fmt.Sprintf("%016x", s.rng.Uint64())
	return e
}

// writeError writes an error body. It takes s.mu.
func (s *Server) writeError(w http.ResponseWriter, status, code int, tag, msg string, extra map[string]any) {
	s.mu.Lock()
	e := s.newError(status, code, tag, msg, extra)
	s.mu.Unlock()
	writeJSON(w, status, e)
}

// writeErrorLocked is writeError for callers that hold s.mu.
func (s *Server) writeErrorLocked(w http.ResponseWriter, status, code int, tag, msg string, extra map[string]any) {
	writeJSON(w, status, s.newError(status, code, tag, msg, extra))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sleepContext waits d or until ctx ends.
func sleepContext(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
