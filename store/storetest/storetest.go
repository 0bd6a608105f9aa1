// Package storetest is the conformance suite of bot.Store: the tests
// every implementation must pass (the bbolt store in package store; a
// PostgreSQL store next). They go through the interface only and test
// what bot relies on; how one implementation lays its data out (files,
// free pages, indexes, migrations, sealing) is tested beside it.
//
// An implementation runs the suite from its own tests:
//
//	func TestConformance(t *testing.T) { storetest.Run(t, openStore) }
package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// Store is what the suite tests: bot.Store, and each Todoist account's
// snapshot (todoist.SnapshotStore, with DeleteSnapshot for team mode's
// /disconnect).
type Store interface {
	bot.Store
	bot.TimerStore
	bot.SettingLister
	LoadSnapshot(ctx context.Context, key string) ([]byte, error)
	SaveSnapshot(ctx context.Context, key string, data []byte) error
	DeleteSnapshot(ctx context.Context, key string) error
	// SettingOrSet is inspector.KeyStore's: a setting kept once, the
	// same for every caller (the run link key).
	SettingOrSet(ctx context.Context, key, value string) (string, error)
	Poller
}

// Poller is the Telegram long poll's leadership and saved offset
// (telegram.Leader and telegram.Offsets): which replica polls, and
// where the next one goes on.
type Poller interface {
	LeadPolling(ctx context.Context, bot string) (lead context.Context, release func(), err error)
	PollOffset(ctx context.Context, bot string) (offset int, saved time.Time, err error)
	SavePollOffset(ctx context.Context, bot string, offset int) error
}

// Checker is a Store that can verify its own consistency (the bbolt
// store's Check). The suite calls Check at the end of the tests that
// leave data behind.
type Checker interface {
	Check() error
}

// Open opens a store on a new, empty database for t. reopen closes the
// store and opens the same database again, as a restart finds it; each
// call closes the store returned last. Open closes what it opened at
// t's end.
type Open func(t *testing.T) (s Store, reopen func() Store)

// A test of the suite.
type test struct {
	name string
	fn   func(t *testing.T, open Open)
}

// tests lists the suite, by concern (see intake.go, runs.go, start.go,
// retention.go and poll.go).
var tests = []test{
	{"Events", testEvents},
	{"MarkEventConcurrentlyOnce", testMarkEventConcurrentlyOnce},
	{"ThreadsAndMessages", testThreadsAndMessages},
	{"CommitKeepsAnExistingThread", testCommitKeepsAnExistingThread},
	{"CommitDuplicateAppliesNothing", testCommitDuplicateAppliesNothing},
	{"Jobs", testJobs},
	{"AuditAndSettings", testAuditAndSettings},
	{"CommitCountsAndJournals", testCommitCountsAndJournals},
	{"Outbox", testOutbox},
	{"Snapshots", testSnapshots},
	{"DeleteSnapshot", testDeleteSnapshot},
	{"ClearedSettingLeavesNoRow", testClearedSettingLeavesNoRow},
	{"SettingOrSetConcurrentlyOnce", testSettingOrSetConcurrentlyOnce},
	{"CommitSetsFields", testCommitSetsFields},
	{"SettingsWithPrefix", testSettingsWithPrefix},
	{"DeliveredForgetsThePreview", testDeliveredForgetsThePreview},
	{"PollOffsets", testPollOffsets},
	{"LeadPolling", testLeadPolling},

	{"Runs", testRuns},
	{"RunsNotEndedFollowTheirStatus", testRunsNotEndedFollowTheirStatus},
	{"CommitRetiresTheAnswerWithTheRun", testCommitRetiresTheAnswerWithTheRun},
	{"TranscriptOnlyFromRun", testTranscriptOnlyFromRun},
	{"WaitingRun", testWaitingRun},
	{"WaitingRunByKey", testWaitingRunByKey},
	{"FeedbackKeptWithTheRun", testFeedbackKeptWithTheRun},
	{"ReadStart", testReadStart},

	{"PruneDeletesWhatIsOlderThanRetention", testPruneDeletesWhatIsOlderThanRetention},
	{"PrunePendingRequests", testPrunePendingRequests},
	{"PruneUnusedSnapshots", testPruneUnusedSnapshots},
	{"DeleteConversation", testDeleteConversation},
	{"DeleteConversationRacingMessages", testDeleteConversationRacingMessages},
	{"DeletedRunsLeaveNothing", testDeletedRunsLeaveNothing},

	{"Timers", testTimers},
	{"TimersClaimedOnce", testTimersClaimedOnce},
	{"TimerSetDuringClaimWins", testTimerSetDuringClaimWins},
	{"TimerClaimExtended", testTimerClaimExtended},
	{"TimersSurviveReopen", testTimersSurviveReopen},
}

// Run runs the suite, each test on a new database that open opens.
func Run(t *testing.T, open Open) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open) })
	}
}

// t0 is the suite's fixed time.
var t0 = time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)

// check verifies s's consistency when it can.
func check(t *testing.T, s Store) {
	t.Helper()
	if c, ok := s.(Checker); ok {
		if err := c.Check(); err != nil {
			t.Error(err)
		}
	}
}

// WantWaiting fails t unless the waiting run of thread key in s is id
// ("" for none).
func WantWaiting(t testing.TB, s bot.Store, key, id string) {
	t.Helper()
	r, err := s.WaitingRun(t.Context(), key)
	wantRun(t, fmt.Sprintf("waiting run of %s", key), r, err, id)
}

// WantWaitingByKey fails t unless the run waiting on key in s is id
// ("" for none).
func WantWaitingByKey(t testing.TB, s bot.Store, key, id string) {
	t.Helper()
	r, err := s.WaitingRunByKey(t.Context(), key)
	wantRun(t, fmt.Sprintf("WaitingRunByKey(%q)", key), r, err, id)
}

func wantRun(t testing.TB, what string, r *bot.Run, err error, id string) {
	t.Helper()
	got := ""
	if r != nil {
		got = r.ID
	}
	if err != nil || got != id {
		t.Errorf("%s = %q (%v), want %q", what, got, err, id)
	}
}

// fresh is a store on a new database, for the tests that do not reopen.
func fresh(t *testing.T, open Open) Store {
	t.Helper()
	s, _ := open(t)
	return s
}
