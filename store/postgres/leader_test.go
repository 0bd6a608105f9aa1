package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// replica opens a second store on the database at u, as another serve
// replica does.
func replica(t *testing.T, u string) *Store {
	t.Helper()
	s, err := Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	s.retry = 50 * time.Millisecond
	return s
}

// leadWithin takes the lead of name within d, or fails t.
func leadWithin(t *testing.T, s *Store, name string, d time.Duration) (context.Context, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	lead, release, err := s.LeadPolling(ctx, name)
	if err != nil {
		t.Fatalf("no lead within %v: %v", d, err)
	}
	return lead, release
}

// notLeading fails t when s takes the lead of name within d.
func notLeading(t *testing.T, s *Store, name string, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if _, release, err := s.LeadPolling(ctx, name); err == nil {
		release()
		t.Fatalf("a second replica leads %s too", name)
	}
}

// One replica of a database leads a bot's polling; another leads once
// the first releases the lead; another bot is led apart.
func TestOneReplicaLeadsAtATime(t *testing.T) {
	a, u := openTest(t)
	a.retry = 50 * time.Millisecond
	b := replica(t, u)
	_, releaseA := leadWithin(t, a, "telegram:1", time.Second)
	notLeading(t, b, "telegram:1", 300*time.Millisecond)
	_, releaseOther := leadWithin(t, b, "telegram:2", time.Second)
	defer releaseOther()
	releaseA()
	_, releaseB := leadWithin(t, b, "telegram:1", time.Second)
	notLeading(t, a, "telegram:1", 300*time.Millisecond)
	releaseB()
}

// When the leader's connection dies (its process was killed: PostgreSQL
// ends the session and its locks), its lead ends and another replica
// leads within seconds.
func TestANewLeaderWhenTheOldOnesConnectionDies(t *testing.T) {
	a, u := openTest(t)
	a.retry = 50 * time.Millisecond
	b := replica(t, u)
	leadA, releaseA := leadWithin(t, a, "telegram:1", time.Second)
	defer releaseA()
	took := make(chan time.Time, 1)
	go func() {
		_, release, err := b.LeadPolling(t.Context(), "telegram:1")
		if err == nil {
			took <- time.Now()
			release()
		}
	}()
	var pid int32
	err := b.pool.QueryRow(t.Context(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 2
		AND classid = (hashtext('tidybot lead')::bigint & 4294967295)::oid
		AND objid = (hashtext(current_schema() || ' telegram:1')::bigint & 4294967295)::oid`).Scan(&pid)
	if err != nil {
		t.Fatalf("find the leader's session: %v", err)
	}
	killed := time.Now()
	if _, err := b.pool.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-took:
		t.Logf("a new leader %v after the old one's session died", at.Sub(killed).Round(time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("no new leader within 5 s of the old one's death")
	}
	select {
	case <-leadA.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the old leader's lead did not end when its connection died")
	}
}

// The offset one replica saves is the one another reads.
func TestReplicasShareThePollOffset(t *testing.T) {
	a, u := openTest(t)
	b := replica(t, u)
	if err := a.SavePollOffset(t.Context(), "telegram:1", 42); err != nil {
		t.Fatal(err)
	}
	if off, _, err := b.PollOffset(t.Context(), "telegram:1"); err != nil || off != 42 {
		t.Errorf("the other replica reads %d (%v), want 42", off, err)
	}
}

// The lead's connection asks for TCP keepalives, so that PostgreSQL
// notices a replica cut off by the network within seconds, not hours.
func TestLeadConnectionKeepsAlive(t *testing.T) {
	s, _ := openTest(t)
	conn, err := s.leaderConn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for name, want := range map[string]string{"tcp_keepalives_idle": "5", "tcp_keepalives_interval": "1", "tcp_keepalives_count": "3"} {
		var got string
		if err := conn.QueryRow(t.Context(), `SELECT current_setting($1)`, name).Scan(&got); err != nil || got != want {
			t.Errorf("%s = %q (%v), want %s", name, got, err, want)
		}
	}
}

// TestPollLeadIsFenced: a replica whose polling lead another has taken
// since (its lock went with its connection before it noticed) can no
// longer save the getUpdates offset nor store a polled update with its
// lead's values (issue 35); the new leader can.
func TestPollLeadIsFenced(t *testing.T) {
	a, u := openTest(t)
	a.retry = 50 * time.Millisecond
	b := replica(t, u)
	leadA, releaseA := leadWithin(t, a, "telegram:1", time.Second)
	stale := context.WithoutCancel(leadA) // its values, as the poll's own context carries them
	if err := a.SavePollOffset(stale, "telegram:1", 10); err != nil {
		t.Fatalf("the leader's save: %v", err)
	}
	releaseA()
	leadB, releaseB := leadWithin(t, b, "telegram:1", time.Second)
	defer releaseB()
	if err := a.SavePollOffset(stale, "telegram:1", 100); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("a former leader's save: %v, want ErrFenced", err)
	}
	j := bot.Job{ID: "j1", ThreadKey: "telegram:5:", Kind: bot.JobIncoming}
	if err := a.Commit(stale, bot.Change{EventKey: "telegram:update:7", EventAt: time.Now(), Job: &j}); !errors.Is(err, bot.ErrFenced) {
		t.Errorf("a former leader's update: %v, want ErrFenced", err)
	}
	if err := b.SavePollOffset(leadB, "telegram:1", 20); err != nil {
		t.Errorf("the new leader's save: %v", err)
	}
	if err := b.Commit(leadB, bot.Change{EventKey: "telegram:update:7", EventAt: time.Now(), Job: &j}); err != nil {
		t.Errorf("the new leader's update: %v", err)
	}
	if off, _, err := b.PollOffset(t.Context(), "telegram:1"); off != 20 || err != nil {
		t.Errorf("offset %d (%v), want the new leader's 20", off, err)
	}
}
