package pgtest

import (
	"context"
	"maps"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestProxyCountsRoundTrips: each statement sent on its own costs one
// round trip, a transaction one for BEGIN, one a statement and one for
// COMMIT, a batch of five one in all; a NOTIFY the server pushes
// unasked costs none; bytes are counted both ways; Reset starts again;
// each is labelled with the statement that began it.
func TestProxyCountsRoundTrips(t *testing.T) {
	ctx := context.Background()
	u := URL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, pu.Host)
	cfg, err := pgx.ParseConfig(p.Via(t, u))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol // no Prepare round trip to account for
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if got := p.RoundTrips(); got < 1 || p.Statements()["connect"] != got {
		t.Errorf("connecting counted %d round trips (%v), want ≥ 1, all \"connect\" (start-up and authentication)", got, p.Statements())
	}

	p.Reset()
	if s := p.Stats(); s != (Stats{}) {
		t.Fatalf("after Reset: %+v, want zeros", s)
	}
	for range 3 {
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.RoundTrips(); got != 3 {
		t.Errorf("3 statements: %d round trips, want 3", got)
	}
	if s := p.Stats(); s.ToServer == 0 || s.ToClient == 0 {
		t.Errorf("bytes not counted both ways: %+v", s)
	}

	p.Reset()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.RoundTrips(); got != 3 {
		t.Errorf("BEGIN, a statement, COMMIT: %d round trips, want 3", got)
	}
	if got, want := p.Statements(), map[string]int64{"begin": 1, "SELECT 1": 1, "commit": 1}; !maps.Equal(got, want) {
		t.Errorf("a transaction by statement: %v, want %v", got, want)
	}

	// pgx's default (statements prepared once, by name): a batch of
	// five costs one round trip once prepared, labelled with its first
	// statement's SQL.
	prep, err := pgx.Connect(ctx, p.Via(t, u))
	if err != nil {
		t.Fatal(err)
	}
	defer prep.Close(ctx)
	batch := func() {
		b := &pgx.Batch{}
		for i := range 5 {
			b.Queue("SELECT $1::int  +  1", i)
		}
		if err := prep.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
	}
	p.Reset()
	batch()
	if got, want := p.Statements(), map[string]int64{"prepare SELECT $1::int + 1": 1, "SELECT $1::int + 1 +4": 1}; !maps.Equal(got, want) {
		t.Errorf("a first batch of 5 by statement: %v, want %v", got, want)
	}
	p.Reset()
	batch()
	if got := p.RoundTrips(); got != 1 {
		t.Errorf("a batch of 5: %d round trips, want 1", got)
	}

	// A notification pushed to a listening connection is no round trip.
	if _, err := conn.Exec(ctx, "LISTEN pgtest_proxy"); err != nil {
		t.Fatal(err)
	}
	other, err := pgx.Connect(ctx, u) // not through the relay
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	p.Reset()
	if _, err := other.Exec(ctx, "NOTIFY pgtest_proxy"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.WaitForNotification(ctx); err != nil {
		t.Fatal(err)
	}
	if s := p.Stats(); s.RoundTrips != 0 || s.ToClient == 0 {
		t.Errorf("a pushed notification: %+v, want 0 round trips and its bytes", s)
	}
}

// TestProxyCountsCommits: a transaction that wrote and committed is one
// commit, named by what it wrote; one rolled back, or failed (its
// COMMIT answered ROLLBACK), none; a write outside a transaction one
// (a batch of them one: an implicit transaction), an UPDATE that
// changed nothing none, a read none; Reset starts again.
func TestProxyCountsCommits(t *testing.T) {
	ctx := context.Background()
	u := URL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, pu.Host)
	conn, err := pgx.Connect(ctx, p.Via(t, u))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE TEMP TABLE pgtest_commits (id int PRIMARY KEY, v int)`); err != nil {
		t.Fatal(err)
	}
	p.Reset()
	do := func(sqls ...string) error {
		b := &pgx.Batch{}
		for _, s := range sqls {
			b.Queue(s)
		}
		return conn.SendBatch(ctx, b).Close()
	}
	steps := []struct {
		sqls []string
		fail bool
	}{
		{sqls: []string{"begin", "INSERT INTO pgtest_commits VALUES (1, 1)", "UPDATE pgtest_commits SET v = 2", "commit"}},
		{sqls: []string{"begin", "DELETE FROM pgtest_commits WHERE id = 9", "rollback"}},
		{sqls: []string{"begin", "SELECT 1/0", "commit"}, fail: true},
		{sqls: []string{"INSERT INTO pgtest_commits VALUES (2, 2)", "INSERT INTO pgtest_commits VALUES (3, 3)", "UPDATE pgtest_commits SET v = 4 WHERE id = 3"}},
		{sqls: []string{"UPDATE pgtest_commits SET v = 5 WHERE id = 9"}},
		{sqls: []string{"SELECT v FROM pgtest_commits"}},
	}
	for _, st := range steps {
		err := do(st.sqls...)
		if (err != nil) != st.fail {
			t.Fatalf("%v: %v", st.sqls, err)
		}
		if err != nil {
			if _, err := conn.Exec(ctx, "rollback"); err != nil {
				t.Fatal(err)
			}
		}
	}
	want := map[string]int64{
		"INSERT pgtest_commits, UPDATE pgtest_commits":            1,
		"(no BEGIN) INSERT pgtest_commits, UPDATE pgtest_commits": 1,
	}
	if got := p.Commits(); !maps.Equal(got, want) {
		t.Errorf("commits: %v, want %v", got, want)
	}
	p.Reset()
	if got := p.Commits(); len(got) != 0 {
		t.Errorf("after Reset: %v, want none", got)
	}
}
