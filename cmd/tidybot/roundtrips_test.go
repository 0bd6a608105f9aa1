package main

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// maxRoundTripsPerMessage bounds what one message costs a `serve` on
// PostgreSQL in round trips to the database, all of it (intake, lease,
// job, runs, journal, outbox, delivery, key reads, cancel checks),
// measured by TestPostgresRoundTripsPerMessage; see docs/performance.md
// for the count and where it goes. 6.0 since a run's start reads in one
// round trip (bot.StartReader; 12.2 without it), 2026-11-29.
const maxRoundTripsPerMessage = 8.0

// maxCommitsPerMessage bounds the write transactions one message
// commits (each a WAL flush on the server), measured by the same test
// (pgtest.Proxy.Commits). A message's own are 5.3 (its intake, the save
// of its write pending, the save after it, its end, its delivery, and
// its lease's share); the writes of the 20 conversations made at
// once share transactions (store/postgres/group.go), so fewer commit.
const maxCommitsPerMessage = 4.0

// TestPostgresRoundTripsPerMessage runs messages from several people
// (each a run that adds a task to Todoist and answers, as in
// BenchmarkReplicaThroughput) through one `serve` on PostgreSQL, its
// every connection through a relay that counts round trips, and fails
// when one message costs more than maxRoundTripsPerMessage; it logs
// where they go, by statement (-v). Each person's first message is not
// counted (it makes their conversation's data keys and thread).
func TestPostgresRoundTripsPerMessage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tidybot serve")
	}
	const people, each = 20, 5
	e := newEnv(t)
	u := pgtest.URL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := pgtest.NewProxy(t, pu.Host)
	e.cfg.DatabaseURL = p.Via(t, u)
	rs := newReplicaSet(t, e, 1, people, "TIDYBOT_LOG_LEVEL=error")
	run := func(from, to int) {
		var wg sync.WaitGroup
		for person := range people {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for m := from; m < to; m++ {
					rs.send(t, person, m, 0)
				}
			}()
		}
		wg.Wait()
		waitFor(t, "every answer", func() bool {
			n := 0
			for _, got := range rs.allAnswers(people) {
				n += len(got)
			}
			return n == people*to
		})
		// What follows an answer's post (its delivery) is the message's
		// too.
		time.Sleep(500 * time.Millisecond)
	}
	run(0, 1)
	p.Reset()
	start := time.Now()
	run(1, 1+each)
	elapsed := time.Since(start)
	st := p.Stats()
	msgs := float64(people * each)
	per := float64(st.RoundTrips) / msgs
	table := roundTripTable(p.Statements(), msgs)
	commits := p.Commits()
	var nc int64
	for _, n := range commits {
		nc += n
	}
	perCommit := float64(nc) / msgs
	ctable := roundTripTable(commits, msgs)
	t.Logf("%d messages in %v: %.1f round trips a message (%.0f bytes to the server, %.0f back), by statement:\n%s",
		people*each, elapsed.Round(time.Millisecond), per, float64(st.ToServer)/msgs, float64(st.ToClient)/msgs, table)
	t.Logf("%.2f write transactions committed a message, by what they wrote:\n%s", perCommit, ctable)
	if per > maxRoundTripsPerMessage {
		t.Errorf("%.1f round trips a message, want at most %.1f; by statement:\n%s", per, maxRoundTripsPerMessage, table)
	}
	if perCommit > maxCommitsPerMessage {
		t.Errorf("%.2f write transactions a message, want at most %.1f; by what they wrote:\n%s", perCommit, maxCommitsPerMessage, ctable)
	}
}

// roundTripTable lists round trips a message by statement, most first.
func roundTripTable(stmts map[string]int64, msgs float64) string {
	type row struct {
		sql string
		n   int64
	}
	var rows []row
	for k, v := range stmts {
		rows = append(rows, row{k, v})
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].n > rows[j].n || rows[i].n == rows[j].n && rows[i].sql < rows[j].sql
	})
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%6.2f  %s\n", float64(r.n)/msgs, r.sql)
	}
	return b.String()
}
