package bot

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"strconv"
	"strings"
	"time"
)

var errJobWrite = errors.New("disk full")

func (s *memStore) Commit(_ context.Context, c Change) error {
	if s.onCommit != nil {
		s.onCommit(c)
	}
	if s.commitErr != nil {
		if err := s.commitErr(c); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.EventKey != "" {
		if _, ok := s.events[c.EventKey]; ok {
			return ErrDuplicate
		}
	}
	if c.Job != nil && s.failJobs > 0 {
		s.failJobs--
		return errJobWrite // nothing applied, as in one transaction
	}
	if c.EventKey != "" {
		s.events[c.EventKey] = c.EventAt
	}
	if c.Thread != nil {
		if _, ok := s.threads[c.Thread.Key]; !ok {
			s.threads[c.Thread.Key] = *c.Thread
		}
	}
	if c.Message != nil {
		s.messages = append(s.messages, *c.Message)
	}
	if c.Job != nil {
		s.jobs = append(s.jobs, *c.Job)
	}
	if c.DeleteJob != "" {
		s.deleteJob(c.DeleteJob)
	}
	if c.Run != nil {
		s.putRun(c.Run)
	}
	s.outbox = append(s.outbox, c.Send...)
	s.audit = append(s.audit, c.Audit...)
	for k, n := range c.Count {
		v, _ := strconv.Atoi(s.settings[k])
		s.settings[k] = strconv.Itoa(v + n)
	}
	for k, f := range c.Fields {
		if v, changed, err := MergeFields(s.settings[k], f); err != nil {
			return err
		} else if changed {
			s.settings[k] = v
		}
	}
	return nil
}

func (s *memStore) deleteJob(id string) {
	for i, j := range s.jobs {
		if j.ID == id {
			s.jobs = append(s.jobs[:i:i], s.jobs[i+1:]...)
			return
		}
	}
}

// cloneRun copies a run deeply enough that later changes to r (its
// Waiting) do not reach the store.
func cloneRun(r *Run) *Run {
	c := *r
	if r.Waiting != nil {
		w := *r.Waiting
		c.Waiting = &w
	}
	return &c
}

func (s *memStore) Outbox(context.Context) ([]Outbound, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Outbound(nil), s.outbox...), nil
}

func (s *memStore) Delivered(_ context.Context, ob Outbound, msgID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.outbox {
		if o.ID == ob.ID {
			s.outbox = append(s.outbox[:i:i], s.outbox[i+1:]...)
			break
		}
	}
	if ob.RunID != "" && ob.WaitKey == "" {
		delete(s.settings, StreamKey(ob.RunID))
	}
	if r := s.runs[ob.RunID]; r != nil && msgID != "" && r.Status == RunWaiting && r.Waiting != nil && r.Waiting.Key == ob.WaitKey {
		r = cloneRun(r)
		r.Waiting.MessageID = msgID
		s.runs[r.ID] = r
	}
	return nil
}

func (s *memStore) Prune(_ context.Context, before time.Time) (Pruned, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n Pruned
	kept := s.messages[:0:0]
	for _, m := range s.messages {
		if m.At.Before(before) {
			n.Messages++
		} else {
			kept = append(kept, m)
		}
	}
	s.messages = kept
	for id, r := range s.runs {
		if r.Status != RunWorking && r.Status != RunQueued && r.Updated.Before(before) {
			n.Audit += s.deleteRun(id)
			n.Runs++
		}
	}
	for k, v := range s.settings {
		var p Incoming
		if strings.HasPrefix(k, PendingPrefix) && (json.Unmarshal([]byte(v), &p) != nil || p.At.Before(before)) {
			delete(s.settings, k)
		}
	}
	return n, nil
}

// deleteRun removes a run and its journal; mu must be held.
func (s *memStore) deleteRun(id string) int {
	delete(s.runs, id)
	kept, n := s.audit[:0:0], 0
	for _, e := range s.audit {
		if e.RunID == id {
			n++
		} else {
			kept = append(kept, e)
		}
	}
	s.audit = kept
	return n
}

func (s *memStore) DeleteConversation(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.messages[:0:0]
	for _, m := range s.messages {
		if m.ThreadKey != key {
			kept = append(kept, m)
		}
	}
	s.messages = kept
	for id, r := range s.runs {
		if r.ThreadKey == key && r.Status != RunWorking && r.Status != RunQueued {
			s.deleteRun(id)
		}
	}
	return nil
}

// snapshot copies the store as a crash at this moment would leave it.
func (s *memStore) snapshot() *memStore {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &memStore{
		events:   maps.Clone(s.events),
		threads:  maps.Clone(s.threads),
		messages: append([]Message(nil), s.messages...),
		runs:     map[string]*Run{},
		jobs:     append([]Job(nil), s.jobs...),
		audit:    append([]AuditEntry(nil), s.audit...),
		settings: maps.Clone(s.settings),
		outbox:   append([]Outbound(nil), s.outbox...),
	}
	for id, r := range s.runs {
		c.runs[id] = cloneRun(r)
	}
	return c
}
