package storetest

import (
	"context"
	"testing"
	"time"
)

// testPollOffsets: the saved getUpdates offset per bot never goes back
// (a leader that lost its lead unknowingly cannot move the next one
// back), says when it was saved, and survives a restart.
func testPollOffsets(t *testing.T, open Open) {
	s, reopen := open(t)
	ctx := t.Context()
	const bot = "telegram:999"
	if off, saved, err := s.PollOffset(ctx, bot); err != nil || off != 0 || !saved.IsZero() {
		t.Fatalf("PollOffset of a new store = %d, %v, %v; want 0, the zero time", off, saved, err)
	}
	before := time.Now()
	for _, off := range []int{5, 3, 7, 6} {
		if err := s.SavePollOffset(ctx, bot, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SavePollOffset(ctx, "telegram:1000", 2); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	off, saved, err := s.PollOffset(ctx, bot)
	if err != nil || off != 7 {
		t.Errorf("PollOffset = %d (%v), want 7: the largest saved", off, err)
	}
	if saved.Before(before.Add(-time.Second)) || saved.After(time.Now().Add(time.Second)) {
		t.Errorf("saved at %v, want about now (%v)", saved, before)
	}
	if off, _, _ := s.PollOffset(ctx, "telegram:1000"); off != 2 {
		t.Errorf("another bot's offset = %d, want 2", off)
	}
	check(t, s)
}

// testLeadPolling: a store with no other replica leads at once; the
// lead ends when its context does, and once released it can be taken
// again.
func testLeadPolling(t *testing.T, open Open) {
	s := fresh(t, open)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	parent, stop := context.WithCancel(ctx)
	lead, release, err := s.LeadPolling(parent, "telegram:999")
	if err != nil {
		t.Fatalf("LeadPolling alone = %v", err)
	}
	if lead.Err() != nil {
		t.Fatal("the lead ended at once")
	}
	stop()
	select {
	case <-lead.Done():
	case <-ctx.Done():
		t.Fatal("the lead outlived its context")
	}
	release()
	lead, release, err = s.LeadPolling(ctx, "telegram:999")
	if err != nil {
		t.Fatalf("LeadPolling after release = %v", err)
	}
	release()
	if lead.Err() == nil {
		t.Error("the lead goes on after release")
	}
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	if _, _, err := s.LeadPolling(done, "telegram:999"); err == nil {
		t.Error("LeadPolling with an ended context succeeded")
	}
}
