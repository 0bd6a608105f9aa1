package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

// TestABriefPartitionFreesTheReplicasConversations: replica A
// (through a relay) holds a conversation; the network between A and
// PostgreSQL drops for a few seconds. A notices (its beat fails) and
// forgets the conversation; the network comes back. The server never
// learns that A's old lease session is dead (the relay's kernel answers
// its keepalive probes), so that session keeps A's old replica lock.
// Yet A leases again at once (a new incarnation: no wait for its old
// lock), and B takes the conversation: the old incarnation's beat is
// over (A marks it dead once the database answers, and its lease time
// runs out anyway). (Issue 35: A's every Hold waited 10 s on its own
// lock and failed, and B could not take the conversation for two
// hours.)
func TestABriefPartitionFreesTheReplicasConversations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.URL(t)
	pu, _ := url.Parse(u)
	p := pgtest.NewProxy(t, pu.Host)
	a, err := Open(ctx, p.Via(t, u))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const key = "telegram:c:"
	if ok, err := a.Hold(ctx, key); !ok || err != nil {
		t.Fatalf("A holds %s: %v %v", key, ok, err)
	}
	p.Cut()
	t0 := time.Now()
	select {
	case <-a.LeasesLost():
		t.Logf("A noticed the loss of its leases after %v", time.Since(t0).Round(100*time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("A did not notice the partition")
	}
	time.Sleep(time.Second)
	p.Heal()
	healed := time.Now()
	t.Logf("server-side keepalive timers of the relay's sessions: %s", keepaliveTimers(p))

	// A takes a message in another conversation: its intake leases it.
	began := time.Now()
	ok, err := a.Hold(ctx, "telegram:d:")
	t.Logf("A.Hold of a new conversation after the heal: %v, %v, in %v", ok, err, time.Since(began).Round(100*time.Millisecond))
	if time.Since(began) > 5*time.Second || err != nil {
		t.Errorf("after the network came back, A's Hold took %v and failed with %v (intake of every message on A waits as long)", time.Since(began).Round(time.Second), err)
	}
	for time.Since(healed) < 25*time.Second {
		if ok, err := b.Hold(ctx, key); err == nil && ok {
			t.Logf("B took %s %v after the heal", key, time.Since(healed).Round(100*time.Millisecond))
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Errorf("B could not take %s for 25 s after the network came back (A forgot it %v before): its lease is held by A's dead session", key, time.Since(t0).Round(time.Second))
}

// keepaliveTimers reads /proc/net/tcp for the server's side of the
// relay's connections (local port 5432): the timer kind (2 = keepalive)
// and when it fires, in seconds.
func keepaliveTimers(p *pgtest.Proxy) string {
	raw, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return err.Error()
	}
	ports := map[string]bool{}
	for _, n := range p.UpstreamPorts() {
		ports[fmt.Sprintf("%04X", n)] = true
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.HasSuffix(f[1], ":1538") {
			continue
		}
		_, rport, _ := strings.Cut(f[2], ":")
		if !ports[rport] {
			continue
		}
		kind, when, _ := strings.Cut(f[5], ":")
		j, _ := strconv.ParseInt(when, 16, 64)
		out = append(out, fmt.Sprintf("timer %s in %ds", kind, j/100))
	}
	return strings.Join(out, "; ")
}

// TestACutLeaseConnectionDoesNotWedgeHandle: a bot on replica A
// answers a message; A's network is cut for longer than its beat may
// take, then heals, its old sessions still alive on the server. A
// message in another conversation is then handled (stored, acked,
// leased) within two seconds and answered. (Issue 35: A's new lease
// connection waited 10 s in pg_advisory_lock for its own replica lock,
// held by the dead session, under the lease mutex: every Handle on A
// took 10 s, past Slack's 3 s ack, and its Hold failed.)
func TestACutLeaseConnectionDoesNotWedgeHandle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.URL(t)
	pu, _ := url.Parse(u)
	p := pgtest.NewProxy(t, pu.Host)
	// The relay keeps a query in flight at the cut waiting for ever (on
	// a real network TCP keepalives end it within seconds), and with it
	// its connection's place in the pool: room for a few.
	via, _ := url.Parse(p.Via(t, u))
	q := via.Query()
	q.Set("pool_max_conns", "16")
	via.RawQuery = q.Encode()
	a, err := Open(ctx, via.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	c := &chats{posts: map[string][]string{}, by: map[int]int{}}
	bt := startBot(t, a, echoAgent{}, c, 0, bot.Config{})
	t.Cleanup(p.CloseAll) // first: what waits on the relay ends

	answered := func(chat string) bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.Contains(c.posts[chat], "did: hello")
	}
	send := func(chat, event string) time.Duration {
		t.Helper()
		hctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		began := time.Now()
		in := bot.Incoming{Platform: "telegram", ChatID: chat, UserID: "42", DM: true, Text: "hello", EventID: event, At: time.Now()}
		if err := bt.Handle(hctx, in); err != nil {
			t.Fatalf("handle a message in %s: %v", chat, err)
		}
		return time.Since(began)
	}
	send("c", "e1")
	soon(t, "the first answer", func() bool { return answered("c") })
	before := a.me()
	p.Cut()
	for deadline := time.Now().Add(20 * time.Second); a.me() == before; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("A did not notice the cut")
		}
	}
	p.Heal()
	if took := send("d", "e2"); took > 2*time.Second {
		t.Errorf("Handle after the heal took %v", took.Round(100*time.Millisecond))
	}
	soon(t, "the answer after the heal", func() bool { return answered("d") })
}
