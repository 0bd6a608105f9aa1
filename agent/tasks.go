package agent

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Priority is a task priority as people see it in Todoist: "p1" (urgent)
// through "p4" (none). Clients map it to their wire format in one place.
type Priority string

// The four priorities.
const (
	P1 Priority = "p1"
	P2 Priority = "p2"
	P3 Priority = "p3"
	P4 Priority = "p4"
)

// Valid reports whether p is one of p1…p4.
func (p Priority) Valid() bool {
	switch p {
	case P1, P2, P3, P4:
		return true
	}
	return false
}

// Project is a Todoist project.
type Project struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	ParentID string `json:"parent_id,omitempty"`
	IsInbox  bool   `json:"is_inbox,omitempty"`
}

// Section is a section of a project.
type Section struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
}

// Label is a personal label. Tasks refer to labels by name.
type Label struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Task is an open Todoist task.
type Task struct {
	ID          string   `json:"id"`
	Content     string   `json:"content"`
	Description string   `json:"description,omitempty"`
	ProjectID   string   `json:"project_id"`
	SectionID   string   `json:"section_id,omitempty"`
	ParentID    string   `json:"parent_id,omitempty"`
	Priority    Priority `json:"priority,omitempty"`
	Labels      []string `json:"labels,omitempty"`
	// Due is the human due string ("every mon", "tomorrow") when the API
	// gives one, else the date; empty when the task has no due date.
	Due         string `json:"due,omitempty"`
	DueDate     string `json:"due_date,omitempty"`
	IsRecurring bool   `json:"is_recurring,omitempty"`
	// DueTimezone is the IANA zone of a due date fixed in time
	// (DueDate "2026-05-20T10:00:00Z"); empty for a full-day or floating
	// date, which is the user's local day or time.
	DueTimezone string `json:"due_timezone,omitempty"`
	// DueLang is the language Todoist reads the due string in ("en").
	DueLang string `json:"due_lang,omitempty"`
}

// DueAsStored returns the task's due date as Todoist stores it, for setting it
// back exactly (undo), or nil when the task has no due date.
func (t Task) DueAsStored() *Due {
	if t.DueDate == "" {
		return nil
	}
	d := &Due{Date: t.DueDate, Timezone: t.DueTimezone, IsRecurring: t.IsRecurring}
	if t.IsRecurring {
		d.String, d.Lang = t.Due, t.DueLang
	}
	return d
}

// Due is a due date as Todoist stores it. Date is "2026-05-20" (a full
// day), "2026-05-20T12:00:00" (a floating time: the user's local time) or
// "2026-05-20T10:00:00Z" (a fixed time, in UTC, with its Timezone). A
// recurring due date also needs its String ("every mon") in its Lang: a
// date alone cannot make a recurrence.
type Due struct {
	Date        string `json:"date"`
	Timezone    string `json:"timezone,omitempty"`
	String      string `json:"string,omitempty"`
	IsRecurring bool   `json:"is_recurring,omitempty"`
	// Lang is the language String is read in ("en", "de"…).
	Lang string `json:"lang,omitempty"`
}

// Snapshot is everything get_overview needs, read in one request.
type Snapshot struct {
	Projects []Project `json:"projects"`
	Sections []Section `json:"sections"`
	Labels   []Label   `json:"labels"`
	Tasks    []Task    `json:"tasks"`
}

// InboxID returns the id of the Inbox project in s, or "".
func (s Snapshot) InboxID() string {
	for _, p := range s.Projects {
		if p.IsInbox {
			return p.ID
		}
	}
	return ""
}

// TaskQuery selects open tasks. Exactly one of the fields is normally set;
// an empty query selects every open task. Filter is a Todoist filter query
// ("today | overdue") and excludes the other fields.
type TaskQuery struct {
	ProjectID string
	SectionID string
	Label     string
	IDs       []string
	Filter    string
}

// WriteKind names one kind of write.
type WriteKind string

// The writes a Tasks implementation applies.
const (
	AddProject    WriteKind = "project_add"
	AddSection    WriteKind = "section_add"
	AddLabel      WriteKind = "label_add"
	AddTask       WriteKind = "item_add"
	UpdateTask    WriteKind = "item_update"
	MoveTask      WriteKind = "item_move"
	CloseTask     WriteKind = "item_close"
	ReopenTask    WriteKind = "item_uncomplete"
	DeleteTask    WriteKind = "item_delete"
	DeleteProject WriteKind = "project_delete"
	// DeleteSection deletes a section and, in Todoist, the tasks in it.
	DeleteSection WriteKind = "section_delete"
	// RestoreOccurrence moves a recurring task that was completed (and so
	// moved to its next date) back to the occurrence in Due: Todoist's
	// item_update_date_complete with is_forward 0, the documented
	// uncompletion of one occurrence.
	RestoreOccurrence WriteKind = "item_update_date_complete"
	// AddComment adds a comment (Content) to the task ID: Todoist's
	// note_add, its notes being comments.
	AddComment WriteKind = "note_add"
	// DeleteComment deletes the comment ID.
	DeleteComment WriteKind = "note_delete"
)

// Write is one change to Todoist. Its UUID is chosen by the caller before
// the write is sent and is the idempotency key: a Write sent twice with the
// same UUID is applied once. TempID names the object a create makes, so that
// later writes of the same batch can refer to it (as ProjectID, SectionID or
// ID) before it has a real id.
type Write struct {
	Kind   WriteKind `json:"kind"`
	UUID   string    `json:"uuid"`
	TempID string    `json:"temp_id,omitempty"`

	// ID is the task, project, section or comment a non-create write
	// acts on, and the task a comment is added to.
	ID string `json:"id,omitempty"`

	// Name is the name of a new project, section or label.
	Name string `json:"name,omitempty"`
	// ParentID is a new project's parent project.
	ParentID string `json:"parent_id,omitempty"`

	// ProjectID and SectionID are a new task's or section's home, or a
	// move's destination (a move sets exactly one of them).
	ProjectID string `json:"project_id,omitempty"`
	SectionID string `json:"section_id,omitempty"`

	// Task fields for item_add and item_update; Content is also a
	// comment's text. In an update, nil means "leave as is"; a non-nil
	// empty Labels clears the labels, and a DueString of "no date" clears
	// the due date.
	Content     *string   `json:"content,omitempty"`
	Description *string   `json:"description,omitempty"`
	DueString   *string   `json:"due_string,omitempty"`
	Priority    Priority  `json:"priority,omitempty"`
	Labels      *[]string `json:"labels,omitempty"`
	// Due sets the due date exactly as Todoist stored it (undo), where a
	// DueString would be read again relative to today. It takes the place
	// of DueString; RestoreOccurrence requires it.
	Due *Due `json:"due,omitempty"`
}

// WriteResult is what became of one Write.
type WriteResult struct {
	UUID string `json:"uuid"`
	// NewID is the id of the object a create made; a create whose Err is
	// nil always has one (never a temp id).
	NewID string `json:"new_id,omitempty"`
	// Err is nil when the write was applied; otherwise it is usually an
	// *Error saying why not.
	Err error `json:"-"`
}

// Tasks is the to-do service the agent acts on. agent/todoist implements it
// against Todoist API v1.
type Tasks interface {
	// Projects lists every active project, the Inbox included.
	Projects(ctx context.Context) ([]Project, error)
	// Tasks lists the open tasks q selects, following every page.
	Tasks(ctx context.Context, q TaskQuery) ([]Task, error)
	// Sections lists the sections of a project.
	Sections(ctx context.Context, projectID string) ([]Section, error)
	// Labels lists personal labels.
	Labels(ctx context.Context) ([]Label, error)
	// Snapshot reads projects, sections, labels and all open tasks in one
	// request.
	Snapshot(ctx context.Context) (Snapshot, error)
	// Apply sends writes in as few requests as the service allows, in order.
	// It returns one result per write, in the same order; a write that
	// failed on its own has its Err set, while the returned error is for a
	// failure of the whole batch. With that error the results still say
	// what is known: a write whose result has no Err (and, for a create,
	// a NewID) was applied, as in part of a batch split over several
	// requests; one whose Err is that error (errors.Is(err, result.Err))
	// may or may not have been (re-send the same batch, which is safe, to
	// finish it); any other Err is that write's own failure.
	Apply(ctx context.Context, writes []Write) ([]WriteResult, error)
}

// IncrementalSnapshots is implemented by a Tasks whose Snapshot, after the
// first, reads only what changed since the last (one small request): the
// engine then reads the inbox through Snapshot rather than page by page.
type IncrementalSnapshots interface {
	// IncrementalSnapshots reports whether later Snapshots are
	// incremental.
	IncrementalSnapshots() bool
}

// TimeZoner is implemented by a Tasks that knows its user's time zone
// (Todoist: the user's tz_info). The engine dates its prompt in that zone,
// so "today" is the user's day, not the server's.
type TimeZoner interface {
	// TimeZone returns the user's time zone.
	TimeZone(ctx context.Context) (*time.Location, error)
}

// ErrorCode classifies an error from a service the agent uses.
type ErrorCode string

// Error codes.
const (
	ErrNotFound     ErrorCode = "not_found"
	ErrUnauthorized ErrorCode = "unauthorized"
	ErrForbidden    ErrorCode = "forbidden"
	ErrRateLimited  ErrorCode = "rate_limited"
	ErrInvalid      ErrorCode = "invalid"
	ErrPlanLimit    ErrorCode = "plan_limit"
	ErrServer       ErrorCode = "server"
	ErrRetired      ErrorCode = "retired"
	// ErrUnsupported: the server does not offer what was asked (a model
	// server without /audio/transcriptions, a model without image input).
	ErrUnsupported ErrorCode = "unsupported"
	// ErrUnreachable: the service could not be reached at all (connection
	// refused, host not found); its message names the setting to check.
	ErrUnreachable ErrorCode = "unreachable"
)

// Error is an error with a code and a message written so that a model (or
// a person) can act on it: "no task with id X". It never holds a secret.
type Error struct {
	Code    ErrorCode
	Message string
	// Err is the underlying cause, if any, for logs.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", e.Message, e.Err)
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// ErrorCodeOf returns the code of the first *Error in err's chain, or "".
func ErrorCodeOf(err error) ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrorMessageOf returns the message of the first *Error in err's chain, or
// err.Error() when there is none.
func ErrorMessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return err.Error()
}
