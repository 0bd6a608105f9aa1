package bot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Job kinds.
const (
	// JobIncoming handles a stored platform event (Job.Incoming).
	JobIncoming = "incoming"
	// JobResume continues run Job.RunID after a restart.
	JobResume = "resume"
)

// ErrDuplicate is returned by Store.Commit when the change's event key
// was recorded before: nothing was applied.
var ErrDuplicate = errors.New("duplicate event")

// Change is what the store applies in one transaction, so that a crash
// keeps all of it or none. Empty fields are skipped.
type Change struct {
	// EventKey is recorded with EventAt; if it was recorded before,
	// nothing is applied and Commit returns ErrDuplicate.
	EventKey string
	EventAt  time.Time
	// Thread is created if there is no thread with its key.
	Thread *Thread
	// Message is appended to its thread.
	Message *Message
	// Job is stored.
	Job *Job
	// DeleteJob names a job that is handled.
	DeleteJob string
	// Run is saved.
	Run *Run
	// Send queues messages for delivery (see Outbound).
	Send []Outbound
	// Audit journals applied writes (see Store.RunAudit), with the run
	// that made them.
	Audit []AuditEntry
	// Count adds to numeric settings (a person's tokens of the day; an
	// absent setting counts as 0). The sum is read and written in the
	// transaction, so concurrent runs lose no addition and no lock is
	// held across a write.
	Count map[string]int
	// Fields sets fields of settings that hold a JSON object (a
	// person's settings): Fields[key][name] is field name's new JSON
	// value. The setting is read and written in the transaction, so
	// its other fields, changed meanwhile, are kept (see MergeFields).
	Fields map[string]map[string]json.RawMessage
}

// MergeFields returns setting value old (a JSON object, "" for none)
// with fields set, and whether that changed it: a setting that holds
// them already is not written again. A value that is not a JSON object
// is left as it is, unchanged: a record nobody can read must not fail
// the transaction a field rides in (Bot.Settings reports it). The error
// is that of a field that is not JSON.
func MergeFields(old string, fields map[string]json.RawMessage) (string, bool, error) {
	obj := map[string]json.RawMessage{}
	if old != "" {
		if err := json.Unmarshal([]byte(old), &obj); err != nil || obj == nil {
			return old, false, nil
		}
	}
	changed := false
	for name, v := range fields {
		if have, ok := obj[name]; ok && bytes.Equal(have, v) {
			continue
		}
		obj[name], changed = v, true
	}
	if !changed {
		return old, false, nil
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return old, false, fmt.Errorf("bot: merge setting fields: %w", err)
	}
	return string(raw), true, nil
}

// Outbound is a message that must reach the user: a run's final answer or
// its question. It is stored with the run's state and deleted once
// posted, so that a restart posts what a crash left unsent.
type Outbound struct {
	ID       string   `json:"id"`
	Platform string   `json:"platform"`
	Msg      Outgoing `json:"msg"`
	// RunID and WaitKey mark a question: once posted, its message id is
	// recorded in the run's Waiting, if the run still waits on WaitKey.
	RunID   string    `json:"run_id,omitempty"`
	WaitKey string    `json:"wait_key,omitempty"`
	Created time.Time `json:"created"`
}

// Pruned counts what Store.Prune deleted.
type Pruned struct {
	Messages, Runs, Audit int
}
