package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

var (
	serveStores   = flag.String("serve-stores", "bbolt,postgres", "BenchmarkServe: the stores to measure, in turn")
	serveSurfaces = flag.String("serve-surfaces", "dm,pane", "BenchmarkServe: where people write: dm (top-level DMs), pane (the assistant pane's threads)")
	servePeople   = flag.Int("serve-people", 200, "BenchmarkServe: people writing at once, each in their own DM")
	serveEach     = flag.Int("serve-each", 10, "BenchmarkServe: messages of each person, in order")
	servePast     = flag.Int("serve-past", 0, "BenchmarkServe: past runs stored in each person's conversation before the measured messages")
	serveWorkers  = flag.Int("serve-workers", 4, "BenchmarkServe: the serve's TIDYBOT_WORKERS (4 is its default)")
)

// BenchmarkServe is issue 36's measurement, for bbolt and PostgreSQL
// side by side in one run: people (-serve-people, 200) each send their
// messages (-serve-each, 10) as signed Slack DMs to `tidybot serve` (the
// built binary, its own process, 4 workers: -serve-workers), each message POSTed once
// the previous was acknowledged, so that up to one message per person is
// in flight; the fake model answers each at once ("You said: …", one
// model call), the fake Slack keeps Slack's rate limits (slacktest,
// limits.go), and the benchmark waits for every answer. The serve, the
// fakes, the senders and PostgreSQL share the machine's cores.
//
// Reported per store: msgs/s from the first POST to the last answer; the
// POSTs' time to acknowledge, p50 and p99; each person's first sign of
// life, from their first POST to the first thing the chat showed of the
// bot in that DM (the 👀 reaction, a status message or the answer), p50
// and p99, and the share of those that were the reaction (reactions.add
// is Tier 3, about 50 a minute for the workspace: past that a message
// gets none), with their own p99; PostgreSQL's round trips a message (the serve reaches it
// through pgtest.Proxy, which counts them); bbolt's fdatasyncs a message
// (the serve's tidybot_store_fsyncs_total on /metrics); the serve's CPU
// a message (user + system, from /proc), its heap allocations a message
// (count and KiB, go_memstats_* on /metrics: unlike CPU time, they do not
// move with the machine's load) and peak RSS; Slack's
// chat.update calls a message. Each is counted from the serve's start
// (after its start-up) to the last answer. A Markdown table of every run
// is printed at the end.
//
// With -serve-past N, each person's conversation has N past runs (and
// their messages) stored before serve starts, to compare the cost of a
// message in a long conversation with that in a new one.
//
//	go test ./cmd/tidybot -run '^$' -bench 'Serve$' -benchtime 1x
//	go test ./cmd/tidybot -run '^$' -bench 'Serve$' -benchtime 1x -args -serve-people 2000
//	go test ./cmd/tidybot -run '^$' -bench 'Serve$' -benchtime 1x -args -serve-people 20 -serve-past 10000
func BenchmarkServe(b *testing.B) {
	var rows []string
	for _, surface := range strings.Split(*serveSurfaces, ",") {
		for _, st := range strings.Split(*serveStores, ",") {
			b.Run(st+"-"+surface, func(b *testing.B) {
				for range b.N {
					r := measureServe(b, st == "postgres", surface == "pane", *servePeople, *serveEach, *servePast)
					r.report(b)
					rows = append(rows, r.row(st+", "+surface))
				}
			})
		}
	}
	// The table once every case has run (the lines go between the
	// benchmark's own, each on a line of its own).
	fmt.Printf("\n%s\n%s\n\n", serveHeader, strings.Join(rows, "\n"))
}

// serveResult is one BenchmarkServe run.
type serveResult struct {
	msgs, people, past      int
	elapsed                 time.Duration
	acks, signs             []time.Duration
	reactions               []time.Duration // of the first signs that were 👀
	reacted                 int
	roundTrips, syncs       float64 // NaN where not measured
	mallocs, allocBytes     float64 // the serve's heap allocations (Go's runtime, on /metrics)
	cpu                     time.Duration
	rss                     float64
	updates                 int
	throttled, statusPosted int
}

const serveHeader = "| store | messages | people | past runs | msgs/s | ack p50 / p99 ms | first sign p50 / p99 ms | first signs that were 👀 (their p99 ms) | round trips/msg | fsyncs/msg | CPU ms/msg | peak RSS MiB | chat.update/msg |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"

func pct(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return math.NaN()
	}
	return float64(d[(len(d)-1)*p/100].Microseconds()) / 1000
}

func (r *serveResult) report(b *testing.B) {
	n := float64(r.msgs)
	b.ReportMetric(n/r.elapsed.Seconds(), "msgs/s")
	b.ReportMetric(pct(r.acks, 50), "ack-p50-ms")
	b.ReportMetric(pct(r.acks, 99), "ack-p99-ms")
	b.ReportMetric(pct(r.signs, 50), "sign-p50-ms")
	b.ReportMetric(pct(r.signs, 99), "sign-p99-ms")
	b.ReportMetric(float64(r.reacted)/float64(r.people), "signs-by-reaction")
	if len(r.reactions) > 0 {
		b.ReportMetric(pct(r.reactions, 99), "reaction-p99-ms")
	}
	if !math.IsNaN(r.roundTrips) {
		b.ReportMetric(r.roundTrips/n, "round-trips/msg")
	}
	if !math.IsNaN(r.syncs) {
		b.ReportMetric(r.syncs/n, "fsyncs/msg")
	}
	b.ReportMetric(float64(r.cpu.Microseconds())/1000/n, "CPU-ms/msg")
	b.ReportMetric(r.mallocs/n, "allocs/msg")
	b.ReportMetric(r.allocBytes/1024/n, "alloc-KiB/msg")
	b.ReportMetric(r.rss, "peak-RSS-MiB")
	b.ReportMetric(float64(r.updates)/n, "chat.update/msg")
}

// ms is v in whole milliseconds, "–" for NaN.
func ms(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

func (r *serveResult) row(store string) string {
	n := float64(r.msgs)
	opt := func(v float64) string {
		if math.IsNaN(v) {
			return "–"
		}
		return fmt.Sprintf("%.2f", v/n)
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %.0f | %.1f / %.1f | %.0f / %.0f | %d of %d (%s) | %s | %s | %.2f | %.0f | %.2f |",
		store, r.msgs, r.people, r.past, n/r.elapsed.Seconds(), pct(r.acks, 50), pct(r.acks, 99), pct(r.signs, 50), pct(r.signs, 99),
		r.reacted, r.people, ms(pct(r.reactions, 99)), opt(r.roundTrips), opt(r.syncs), float64(r.cpu.Microseconds())/1000/n, r.rss, float64(r.updates)/n)
}

// measureServe runs BenchmarkServe's measurement once.
func measureServe(b *testing.B, onPostgres, pane bool, people, each, past int) *serveResult {
	e := newEnv(b)
	sl := slacktest.New()
	defer sl.Close()
	e.cfg.DatabaseURL = ""
	var proxy *pgtest.Proxy
	dbURL := ""
	if onPostgres {
		u := pgtest.URL(b)
		pu, err := url.Parse(u)
		if err != nil {
			b.Fatal(err)
		}
		proxy = pgtest.NewProxy(b, pu.Host)
		dbURL = proxy.Via(b, u)
		e.cfg.DatabaseURL = dbURL
	}
	if past > 0 {
		seedPast(b, e, people, past)
	}
	allowed := make([]string, people)
	for p := range people {
		allowed[p] = fmt.Sprint("slack:U", p)
	}
	metrics := freeAddr(b)
	s := startServeProcess(b, e, "SLACK_BOT_TOKEN="+slacktest.Token, "SLACK_SIGNING_SECRET="+slackSecret, "SLACK_API_URL="+sl.URL,
		"TIDYBOT_ALLOWED_USERS="+strings.Join(allowed, ","), "TIDYBOT_WORKERS="+strconv.Itoa(*serveWorkers), "TIDYBOT_DATABASE_URL="+dbURL, "TIDYBOT_METRICS_ADDR="+metrics,
		"TIDYBOT_CPU_PROFILE="+os.Getenv("TIDYBOT_BENCH_CPU_PROFILE"), "TIDYBOT_TRACE="+os.Getenv("TIDYBOT_BENCH_TRACE"))
	defer s.stop()
	// Each person's DM; in the pane, the thread they opened there.
	channel, thread := make([]string, people), make([]string, people)
	for p := range people {
		channel[p] = fmt.Sprint("D", p)
	}
	if pane {
		sl.Subscribe("message.im", "assistant_thread_started")
		for p := range people {
			var ev []byte
			thread[p], ev = sl.StartAssistantThread(fmt.Sprint("U", p), "C1")
			channel[p] = sl.IM(fmt.Sprint("U", p))
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			postJSON(b, http.DefaultClient, s.base+"/slack/events", ev, "assistant_thread_started",
				"X-Slack-Request-Timestamp", ts, "X-Slack-Signature", slacktest.Sign(slackSecret, ts, ev))
		}
		waitFor(b, "the panes' prompts", func() bool {
			for p := range people {
				if pn, _ := sl.AssistantThread(channel[p], thread[p]); len(pn.Prompts) == 0 {
					return false
				}
			}
			return true
		})
	}
	body := func(p, m int) []byte {
		if pane {
			return sl.Events(slacktest.Message{Channel: channel[p], ChannelType: "im", User: fmt.Sprint("U", p), Text: fmt.Sprint("hello ", m), TS: serveTS(p, m), ThreadTS: thread[p]})[0]
		}
		return slacktest.MessageEvent(fmt.Sprintf("Ev%d-%d", p, m), channel[p], "im", fmt.Sprint("U", p), fmt.Sprint("hello ", m), serveTS(p, m), "")
	}
	r := &serveResult{msgs: people * each, people: people, past: past, roundTrips: math.NaN(), syncs: math.NaN()}
	syncs0 := scrapeMetric(b, metrics, "tidybot_store_fsyncs_total")
	mallocs0, bytes0 := scrapeMetric(b, metrics, "go_memstats_mallocs_total"), scrapeMetric(b, metrics, "go_memstats_alloc_bytes_total")
	cpu0 := cpuTime(s.pid)
	if proxy != nil {
		proxy.Reset()
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: people, MaxConnsPerHost: people}, Timeout: time.Minute}
	acks := make([]time.Duration, people*each)
	first := make([]time.Time, people)
	var failed atomic.Int32
	var wg sync.WaitGroup
	start := time.Now()
	for p := range people {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range each {
				ev := body(p, m)
				req, _ := http.NewRequest(http.MethodPost, s.base+"/slack/events", bytes.NewReader(ev))
				now := strconv.FormatInt(time.Now().Unix(), 10)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Slack-Request-Timestamp", now)
				req.Header.Set("X-Slack-Signature", slacktest.Sign(slackSecret, now, ev))
				t0 := time.Now()
				if m == 0 {
					first[p] = t0
				}
				resp, err := hc.Do(req)
				acks[p*each+m] = time.Since(t0)
				if err != nil || resp.StatusCode != http.StatusOK {
					if failed.Add(1) <= 5 {
						b.Errorf("person %d message %d: %v %v", p, m, resp, err)
					}
					if err == nil {
						resp.Body.Close()
					}
					continue
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	// Every answer is a chat.postMessage, or in the pane a stream
	// (chat.startStream) while Tier 2 allows; the fake's call counters
	// are cheap to poll, its posts are not, so they are counted once the
	// calls are enough.
	want := people * each
	answered := func() int {
		n := 0
		for _, p := range sl.AllPosts() {
			if isAnswer(p) {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if sl.Calls("chat.postMessage")+sl.Calls("chat.startStream") >= want && answered() >= want {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d answered", answered(), want)
		}
	}
	r.elapsed = time.Since(start)
	r.cpu, r.rss = cpuTime(s.pid)-cpu0, peakRSS(s.pid)
	// Allocations do not move with the machine's load as CPU time does:
	// the figure to compare two builds by on a busy machine. (Each
	// scrape of /metrics allocates too: two, the same in every run.)
	r.mallocs = scrapeMetric(b, metrics, "go_memstats_mallocs_total") - mallocs0
	r.allocBytes = scrapeMetric(b, metrics, "go_memstats_alloc_bytes_total") - bytes0
	if onPostgres {
		r.roundTrips = float64(proxy.RoundTrips())
		logStatements(b, proxy.Statements(), r.msgs)
	} else {
		r.syncs = scrapeMetric(b, metrics, "tidybot_store_fsyncs_total") - syncs0
	}
	r.updates, r.throttled = sl.Calls("chat.update"), sl.Throttled("reactions.add")
	// Each person's first sign of life: the first reaction to their
	// first message, the first post in their DM or the pane's first
	// status line, whichever came first.
	shown := map[string]time.Time{}
	for _, p := range sl.AllPosts() {
		if t, ok := shown[p.Channel]; !ok || p.At.Before(t) {
			shown[p.Channel] = p.At
		}
		if !isAnswer(p) {
			r.statusPosted++
		}
	}
	for p := range people {
		ch := channel[p]
		at, reacted := shown[ch], false
		if pane {
			if pn, _ := sl.AssistantThread(ch, thread[p]); len(pn.StatusAt) > 0 && (at.IsZero() || pn.StatusAt[0].Before(at)) {
				at = pn.StatusAt[0]
			}
		}
		for _, re := range sl.Reactions(ch) {
			if re.TS == serveTS(p, 0) && (at.IsZero() || re.At.Before(at)) {
				at, reacted = re.At, true
			}
		}
		if at.IsZero() {
			b.Errorf("person %d: no sign of life", p)
			continue
		}
		if reacted {
			r.reacted++
			r.reactions = append(r.reactions, at.Sub(first[p]))
		}
		r.signs = append(r.signs, at.Sub(first[p]))
	}
	// Each person's first message (a conversation new to the store: on
	// PostgreSQL its data key is made with it) apart from the others.
	{
		var a0, a1 []time.Duration
		for i, a := range acks {
			if i%each == 0 {
				a0 = append(a0, a)
			} else {
				a1 = append(a1, a)
			}
		}
		slices.Sort(a0)
		slices.Sort(a1)
		b.Logf("acks of first messages p50 %.1f ms, p99 %.1f ms; of the others p50 %.1f ms, p99 %.1f ms", pct(a0, 50), pct(a0, 99), pct(a1, 50), pct(a1, 99))
	}
	r.acks = acks
	slices.Sort(r.acks)
	slices.Sort(r.signs)
	slices.Sort(r.reactions)
	if r.throttled > 0 {
		b.Errorf("the fake Slack answered 429 to %d reactions.add: the adapter's lane should have held them back", r.throttled)
	}
	b.Logf("status messages posted: %d; chat.update: %d; reactions: %d first signs of %d people", r.statusPosted, r.updates, r.reacted, people)
	return r
}

// isAnswer reports whether p is an answer of the scripted model.
func isAnswer(p slacktest.Posted) bool {
	return strings.HasPrefix(p.Text, "You said: ") || strings.HasPrefix(p.Shown(), "You said: ")
}

// logStatements logs the round trips a message cost by the statement
// that began them, the most first (the top 12).
func logStatements(b *testing.B, stmts map[string]int64, msgs int) {
	keys := make([]string, 0, len(stmts))
	for k := range stmts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int { return int(stmts[y] - stmts[x]) })
	var sb strings.Builder
	for i, k := range keys {
		if i == 12 {
			break
		}
		fmt.Fprintf(&sb, "\n  %.2f  %s", float64(stmts[k])/float64(msgs), k)
	}
	b.Logf("PostgreSQL round trips a message by the statement that began them:%s", sb.String())
}

// serveTS is person p's message m's ts.
func serveTS(p, m int) string { return fmt.Sprintf("%d.%06d", 1700000000+m, p) }

// scrapeMetric reads one counter from the serve's /metrics.
func scrapeMetric(b *testing.B, addr, name string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Fatalf("/metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatalf("/metrics %s: %v", name, err)
			}
			return f
		}
	}
	return math.NaN()
}

// seedPast stores past runs in each person's DM conversation, as serve
// would have left them (the person's message and the run, done with its
// answer), before serve starts; the people's conversations are filled
// side by side, so that their commits share transactions.
func seedPast(b *testing.B, e *env, people, past int) {
	ctx := context.Background()
	st, err := openStore(ctx, e.cfg)
	if err != nil {
		b.Fatalf("open the store to seed it: %v", err)
	}
	defer st.Close()
	t0 := time.Now().Add(-time.Duration(past) * time.Minute)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for p := range people {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			in := bot.Incoming{Platform: "slack", ChatID: fmt.Sprint("D", p), UserID: fmt.Sprint("U", p), DM: true}
			key := in.ThreadKey()
			th := &bot.Thread{Key: key, Platform: "slack", ChatID: in.ChatID}
			for i := range past {
				at := t0.Add(time.Duration(i) * time.Minute)
				text := fmt.Sprint("past ", i)
				run := &bot.Run{ID: fmt.Sprintf("past-%d-%d", p, i), ThreadKey: key, Platform: "slack", ChatID: in.ChatID, UserID: in.UserID,
					Status: bot.RunDone, Instruction: text, Answer: "You said: " + text, Created: at, Updated: at, DM: true,
					Transcript: []byte(`{"v":1}`)}
				c := bot.Change{Thread: th, Message: &bot.Message{ThreadKey: key, Role: bot.RoleUser, Text: text, At: at}, Run: run}
				if err := st.Commit(ctx, c); err != nil {
					b.Errorf("seed person %d run %d: %v", p, i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
