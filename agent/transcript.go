package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TranscriptVersion is the newest version of the Transcript JSON this
// package reads and writes. It reads every version from 1 up to it, and
// writes each transcript at the oldest version that runs it safely (see
// version), so that the previous build, during a rolling upgrade, can
// resume what this one saved.
//
// Version 2 adds what a version-1 build (before run policies) would drop
// while decoding, widening what the run may do: a Policy other than a
// person's message's, known aliases of earlier runs (Earlier). A
// transcript carrying one is written as version 2, which a
// version-1 build refuses; any other is written as version 1.
const TranscriptVersion = 2

// ErrTranscriptNewer is the error of decoding a transcript written by a
// newer build than this one: it is to be left, untouched, to a replica
// that reads it.
var ErrTranscriptNewer = errors.New("agent: transcript written by a newer version")

// Protocol is how the engine talks to the model.
type Protocol string

// Protocols.
const (
	// ProtocolTools uses native function calling: every action is a tool.
	ProtocolTools Protocol = "tools"
	// ProtocolJSON has the model answer {"thought", "action"} as JSON.
	ProtocolJSON Protocol = "json"
)

// Status is where a run stands after Start or Resume returns.
type Status string

// Run statuses.
const (
	// StatusDone: the model gave its final answer.
	StatusDone Status = "done"
	// StatusFailed: the request could not be done (fail_task, a model that
	// kept answering garbage, a fatal service error).
	StatusFailed Status = "failed"
	// StatusStopped: a limit (steps, time, tokens, a loop) ended the run;
	// the answer lists what was done.
	StatusStopped Status = "stopped"
	// StatusAsking: the run waits for the user's answer to a question.
	StatusAsking Status = "asking"
	// StatusConfirming: the run waits for a yes/no on a gated write.
	StatusConfirming Status = "confirming"
	// StatusInterrupted: the context ended the run early (cancel or
	// shutdown); it can be resumed from its transcript.
	StatusInterrupted Status = "interrupted"
)

// Waiting reports whether the run waits for the user.
func (s Status) Waiting() bool { return s == StatusAsking || s == StatusConfirming }

// Final reports whether the run has ended for good.
func (s Status) Final() bool {
	return s == StatusDone || s == StatusFailed || s == StatusStopped
}

// Applied is one applied write, with the writes that undo it.
type Applied struct {
	Write   Write   `json:"write"`
	NewID   string  `json:"new_id,omitempty"`
	Inverse []Write `json:"inverse,omitempty"`
	// Summary says what was done in words: `moved "Buy cake" to Birthday`.
	Summary string `json:"summary"`
	// Dest names a move's destination, for Report.
	Dest string `json:"dest,omitempty"`
}

// wait is what a suspended run waits for.
type wait struct {
	Kind     string   `json:"kind"` // "ask" or "confirm"
	CallID   string   `json:"call_id"`
	Question string   `json:"question"`
	Options  []string `json:"options,omitempty"`
	// Label names the confirming button: "Delete 1 task".
	Label string `json:"label,omitempty"`
}

// pendingWrite is a step's writes, saved before they are sent so that a
// resumed run re-sends the same uuids.
type pendingWrite struct {
	Call   call    `json:"call"`
	Writes []Write `json:"writes"`
	Plan   *plan   `json:"plan"`
	// Done holds the observation of what an earlier attempt of these
	// writes applied (a batch that failed in part as the run was
	// interrupted); the rest is in Writes.
	Done []string `json:"done,omitempty"`
	// results are the results of an applied part (see splitApplied).
	results []WriteResult
}

// subset is the pending write of the writes at idx only (with their plan
// items; the plan's notes and Done stay with it).
func (p *pendingWrite) subset(idx []int) *pendingWrite {
	pl := *p.Plan
	pl.Items = make([]planItem, len(idx))
	ws := make([]Write, len(idx))
	for j, i := range idx {
		ws[j], pl.Items[j] = p.Writes[i], p.Plan.Items[i]
	}
	return &pendingWrite{Call: p.Call, Writes: ws, Plan: &pl, Done: p.Done}
}

// Transcript is a run's whole state. It round-trips through JSON, and
// Resume continues a run from it exactly where it stopped.
type Transcript struct {
	V           int      `json:"v"`
	Protocol    Protocol `json:"protocol"`
	Instruction string   `json:"instruction"`
	Status      Status   `json:"status"`
	// Confirm is Input.Confirm: the run's own confirmation policy
	// (empty: the engine's), kept so that a resumed run keeps it.
	Confirm ConfirmPolicy `json:"confirm,omitempty"`
	// TimeZone is Input.TimeZone: the zone of the run's "today" (empty:
	// the to-do service's).
	TimeZone string `json:"tz,omitempty"`
	// Model is Input.Model: the model the run asks (empty: the model's
	// default), kept so that a resumed run asks the same one.
	Model string `json:"model,omitempty"`
	// Language is Input.Language: the language the run answers in
	// (empty: the person's), kept so that a resumed run knows it too.
	Language string `json:"language,omitempty"`
	// Allow is Input.Allow: the only actions the run may take (empty:
	// every action). It is kept so that a resumed run keeps its limits.
	Allow []string `json:"allow,omitempty"`
	// Touch is Input.Touch: the only existing tasks writes may change.
	Touch []string `json:"touch,omitempty"`
	// Policy is Input.Policy: the kind of run, whose Policy every call
	// is checked against (empty in transcripts saved before it: see
	// inferPolicy).
	Policy PolicyName `json:"policy,omitempty"`
	// Messages is the conversation with the model, system prompt first.
	Messages []Message `json:"messages"`
	// Actions are the actions the model is offered as tools; empty
	// offers every action.
	Actions []string `json:"actions,omitempty"`
	// Calls are the actions of the last reply not yet run.
	Calls   []call        `json:"calls,omitempty"`
	Wait    *wait         `json:"wait,omitempty"`
	Pending *pendingWrite `json:"pending,omitempty"`
	// Steps counts model calls; Repairs the unusable replies in a row.
	Steps   int   `json:"steps"`
	Repairs int   `json:"repairs"`
	Usage   Usage `json:"usage"`
	// Elapsed is the working time so far (not time spent waiting).
	Elapsed time.Duration `json:"elapsed"`
	// Seen counts each action+arguments since the last write that
	// changed something, for loop detection.
	Seen map[string]int `json:"seen,omitempty"`
	// Failures counts failed calls in the current reply.
	Failures int `json:"failures,omitempty"`
	// Journal lists every applied write, in order.
	Journal []Applied `json:"journal,omitempty"`
	// Answer is the final answer or the reason the run ended.
	Answer string `json:"answer,omitempty"`
	// Reported says Answer is the engine's Report of the writes: the
	// model left final_answer's answer out, so it said nothing of its
	// own (of what it left undone, say).
	Reported bool  `json:"reported,omitempty"`
	Known    known `json:"known"`
	// Spans time every model call, Todoist request and wait for the
	// user, in order (the run inspector's timeline).
	Spans []Span `json:"spans,omitempty"`
}

// known is what the run has read, used to check ids without an API call,
// to name close matches and to compute undo writes.
type known struct {
	Projects      map[string]Project `json:"projects,omitempty"`
	ProjectsFresh bool               `json:"projects_fresh,omitempty"`
	Sections      map[string]Section `json:"sections,omitempty"`
	Tasks         map[string]Task    `json:"tasks,omitempty"`
	// TasksFresh is set when Tasks holds every open task.
	TasksFresh bool   `json:"tasks_fresh,omitempty"`
	InboxID    string `json:"inbox_id,omitempty"`
	// Suspect quotes text read that reads like an instruction to the
	// assistant (see instructionLike).
	Suspect []string `json:"suspect,omitempty"`
	// Aliases are the short ids the model sees (alias → id; see alias.go).
	Aliases map[string]string `json:"aliases,omitempty"`
	// Earlier are the alias-shaped words of the history: an earlier
	// run's aliases, never given in this run (see alias.go).
	Earlier map[string]bool `json:"earlier,omitempty"`
	// Listed are the tasks of the last inbox listing (get_overview,
	// get_inbox_tasks, get_tasks of the Inbox), in its order: what the
	// codes of move_tasks' plan stand for (see filing.go).
	Listed   []string `json:"listed,omitempty"`
	aliasIdx *aliasIndex
}

// stale marks the lists read so far as possibly out of date: ids missing
// from them are then asked of Todoist instead of reported unknown.
func (k *known) stale() { k.ProjectsFresh, k.TasksFresh = false, false }

// version is the oldest transcript version that runs t with every limit
// it holds: 1 unless a version-1 build would drop a field that narrows
// the run (see TranscriptVersion).
func (t *Transcript) version() int {
	switch {
	case len(t.Known.Earlier) > 0:
		return 2
	case t.Policy == "":
		return 1 // saved by version 1: its policy is inferred, there too
	case t.Policy != PolicyMessage:
		// A version-1 build knows no policy: the others would lose
		// their limits.
		return 2
	case inferPolicy(t.Touch, t.Actions, false) != PolicyMessage:
		// Read back without its policy, the run would not be a
		// person's message any more (see inferPolicy).
		return 2
	}
	// A person's message may do everything in version 1 too (that
	// build's own gate asks for a yes).
	return 1
}

// MarshalTranscript encodes t, at the oldest version that runs it with
// its limits (see TranscriptVersion).
func MarshalTranscript(t *Transcript) ([]byte, error) {
	c := *t
	c.V = t.version()
	b, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("agent: encode transcript: %w", err)
	}
	return b, nil
}

// UnmarshalTranscript decodes a transcript saved by MarshalTranscript,
// of this version or an earlier one. One written by a newer build fails
// with ErrTranscriptNewer.
func UnmarshalTranscript(b []byte) (*Transcript, error) {
	var t Transcript
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("agent: decode transcript: %w", err)
	}
	switch {
	case t.V > TranscriptVersion:
		return nil, fmt.Errorf("%w: version %d, this build reads 1 to %d", ErrTranscriptNewer, t.V, TranscriptVersion)
	case t.V < 1:
		return nil, fmt.Errorf("agent: transcript version %d, want 1 to %d", t.V, TranscriptVersion)
	}
	t.V = TranscriptVersion // as read: version 1 holds nothing version 2 lacks
	return &t, nil
}

// DoneList says what the run has changed so far, for an answer that ends
// it early: "Done so far:" with the first 15 writes' summaries, or
// "Nothing was changed." (also for a nil transcript).
func (t *Transcript) DoneList() string {
	if t == nil || len(t.Journal) == 0 {
		return "Nothing was changed."
	}
	var b strings.Builder
	b.WriteString("Done so far:")
	for i, a := range t.Journal {
		if i == 15 {
			fmt.Fprintf(&b, "\n• … and %d more changes", len(t.Journal)-15)
			break
		}
		b.WriteString("\n• " + a.Summary)
	}
	return b.String()
}

// Report says what the run's writes did, for a final answer the model
// left to the engine: the few changes one by one, more as counts, moves
// by destination ("Moved 50 tasks: 10 to Garden, …"). It claims only
// what the journal holds.
func (t *Transcript) Report() string {
	if t == nil || len(t.Journal) == 0 {
		return "Nothing was changed."
	}
	if len(t.Journal) <= reportOneByOne {
		parts := make([]string, len(t.Journal))
		for i, a := range t.Journal {
			parts[i] = a.Summary
		}
		return capitalize(strings.Join(parts, "; ")) + "."
	}
	var kinds []WriteKind
	counts := map[WriteKind]int{}
	var created, dests []string // projects created, move destinations: in order
	perDest := map[string]int{}
	for _, a := range t.Journal {
		k := a.Write.Kind
		if counts[k] == 0 {
			kinds = append(kinds, k)
		}
		counts[k]++
		switch {
		case k == AddProject:
			created = append(created, a.Write.Name)
		case k == MoveTask && a.Dest != "":
			if perDest[a.Dest] == 0 {
				dests = append(dests, a.Dest)
			}
			perDest[a.Dest]++
		}
	}
	named := dests[:min(len(dests), reportDests)]
	var parts []string
	for _, k := range kinds {
		switch k {
		case AddProject:
			// A project a named move went to is marked new there, not
			// named twice.
			others := slices.DeleteFunc(slices.Clone(created), func(name string) bool { return slices.Contains(named, name) })
			if len(others) > 0 {
				parts = append(parts, fmt.Sprintf("created %s (%s)", plural(len(others), "project"), strings.Join(others, ", ")))
			}
		case MoveTask:
			parts = append(parts, movedReport(counts[k], dests, perDest, created))
		default:
			parts = append(parts, reportVerb(k, counts[k]))
		}
	}
	return capitalize(strings.Join(parts, "; ")) + "."
}

// reportOneByOne is how many changes Report lists one by one.
const reportOneByOne = 3

// reportDests is how many destinations Report names.
const reportDests = 6

// movedReport says n moves by destination, naming the first
// reportDests (a project created, "(new)") and counting the rest.
func movedReport(n int, dests []string, perDest map[string]int, created []string) string {
	s := "moved " + plural(n, "task")
	if len(dests) == 0 {
		return s
	}
	shown := make([]string, 0, reportDests+1)
	rest := n
	for i, d := range dests {
		if i == reportDests {
			shown = append(shown, fmt.Sprintf("%d more to %s", rest, plural(len(dests)-i, "other place")))
			break
		}
		line := fmt.Sprintf("%d to %s", perDest[d], d)
		if slices.Contains(created, d) {
			line += " (new)"
		}
		shown = append(shown, line)
		rest -= perDest[d]
	}
	return s + ": " + strings.Join(shown, ", ")
}

// reportVerb says n writes of kind k in words.
func reportVerb(k WriteKind, n int) string {
	w, ok := reportWords[k]
	if !ok {
		return "made " + plural(n, "other change")
	}
	return w.verb + " " + plural(n, w.noun) + w.note
}

// reportWords name the writes Report counts.
var reportWords = map[WriteKind]struct{ verb, noun, note string }{
	AddTask:           {"added", "task", ""},
	UpdateTask:        {"updated", "task", ""},
	RestoreOccurrence: {"updated", "task", ""},
	CloseTask:         {"completed", "task", ""},
	ReopenTask:        {"reopened", "task", ""},
	DeleteTask:        {"deleted", "task", " (cannot be undone)"},
	AddSection:        {"created", "section", ""},
	AddLabel:          {"created", "label", ""},
	AddComment:        {"added", "comment", ""},
	DeleteProject:     {"deleted", "project", ""},
	DeleteSection:     {"deleted", "section", ""},
	DeleteComment:     {"deleted", "comment", ""},
}

// capitalize upper-cases s's first letter (ASCII, as the summaries start).
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
