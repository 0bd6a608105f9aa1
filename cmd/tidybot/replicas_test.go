package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
	"github.com/tidybot/tidybot/store/postgres/pgtest"
)

var (
	replicaMsgs   = flag.Int("replica-msgs", 400, "messages in TestReplicasSurviveKills (the issue's full size: 2000)")
	replicaPeople = flag.Int("replica-people", 40, "people sending them in TestReplicasSurviveKills (full size: 200)")
	replicaKill   = flag.Duration("replica-kill-every", time.Second, "how often TestReplicasSurviveKills SIGKILLs a replica")
	replicaCut    = flag.Duration("replica-cut", 0, "when set, a disruption of TestReplicasSurviveKills in three cuts a replica's database link (both ways, its sockets left open) for this long, through a TCP relay per replica")
	replicaFreeze = flag.Duration("replica-freeze", 0, "when set, every other disruption of TestReplicasSurviveKills SIGSTOPs a replica for this long (longer than the lease time, 10 s: a GC pause) instead of a SIGKILL")
	replicaLogs   = flag.String("replica-logs", "", "when set, TestReplicasSurviveKills writes the replicas' whole logs to this file (a failure shows only their last 20,000 bytes)")
	replicaCPUs   = flag.Float64("replica-cpus", 0, "when set, each serve of BenchmarkReplicaThroughput is limited to this many cores (a cgroup CPU quota, as a container's CPU limit sets; needs root): a replica brings its own share of the machine")
	replicaProf   = flag.String("replica-cpuprofile", "", "when set, each serve of BenchmarkReplicaThroughput writes a CPU profile into this directory (TIDYBOT_CPU_PROFILE), named after the benchmark and the replica")
)

// replicaLeaseTime is store/postgres's lease time (leaseTime; see
// docs/architecture.md, "What a lease guarantees"): a replica whose beat
// is older than this by the database's clock has its leases taken.
const replicaLeaseTime = 10 * time.Second

// replica is one `tidybot serve` process of a replicated set, started
// again on the same address after a kill.
type replica struct {
	t       testing.TB
	environ []string
	base    string
	logs    *syncBuffer

	// mu protects the fields below.
	mu    sync.Mutex
	cmd   *exec.Cmd
	ended chan error
	gone  bool // cmd has ended
}

// startReplica starts the built binary's serve with environ (the
// settings of every replica) on an address of its own.
func startReplica(t testing.TB, environ []string, logs *syncBuffer) *replica {
	t.Helper()
	addr := freeAddr(t)
	r := &replica{t: t, environ: append(append([]string{}, environ...), "TIDYBOT_HTTP_ADDR="+addr), base: "http://" + addr, logs: logs}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *replica) start() {
	r.t.Helper()
	cmd := exec.Command(tidybotBinary(r.t), "serve")
	cmd.Env = r.environ
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- cmd.Wait() }()
	r.mu.Lock()
	r.cmd, r.ended, r.gone = cmd, ended, false
	r.mu.Unlock()
	waitServing(r.t, r.base, ended, r.logs)
}

// kill SIGKILLs the process and waits for its end.
func (r *replica) kill() {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.ended
	r.gone = true
}

// freeze SIGSTOPs the process for d, then SIGCONTs it.
func (r *replica) freeze(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(d)
	_ = r.cmd.Process.Signal(syscall.SIGCONT)
}

// stop ends the process with SIGTERM, as a rolling deploy does.
func (r *replica) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return
	}
	r.gone = true
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.ended:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		r.t.Errorf("serve did not stop within 30 s of SIGTERM")
	}
}

// replicaSet is several serves on one store against one fake Slack and
// the env's fake model and Todoist; people are the Slack users U0… who
// each write in their direct chat D0…. With tg set (withTelegram), the
// odd people write on Telegram instead, as users and private chats
// tgUser(p), their updates POSTed to the replicas' webhook.
type replicaSet struct {
	e        *env
	sl       *slacktest.Server
	tg       *telegramtest.Server
	replicas []*replica
	logs     *syncBuffer
	hc       *http.Client
	acked    []atomic.Int64 // when set, messages of each person a replica took
}

// tgSecret is the replicas' TELEGRAM_WEBHOOK_SECRET.
const tgSecret = "replica-secret"

// tgUser is person p's Telegram user id, and their private chat's.
func tgUser(p int) int64 { return int64(5000 + p) }

// onTelegram: with Telegram, the odd people write there.
func (rs *replicaSet) onTelegram(p int) bool { return rs.tg != nil && p%2 == 1 }

// withTelegram is the settings that serve tg by webhook (any replica
// takes the POST) and let the odd people of people write there, to be
// given to newReplicaSet as extra settings, and tg set on its set.
func withTelegram(tg *telegramtest.Server, people int) []string {
	allowed := make([]string, people)
	for p := range allowed {
		allowed[p] = fmt.Sprintf("slack:U%d", p)
		if p%2 == 1 {
			allowed[p] = fmt.Sprintf("telegram:%d", tgUser(p))
		}
	}
	return []string{"TELEGRAM_BOT_TOKEN=" + tg.Token, "TELEGRAM_API_URL=" + tg.URL,
		"TELEGRAM_WEBHOOK_URL=https://bot.example.com/telegram/webhook", "TELEGRAM_WEBHOOK_SECRET=" + tgSecret,
		"TIDYBOT_ALLOWED_USERS=" + strings.Join(allowed, ",")}
}

// extra settings come last (the last of a duplicate wins).
func newReplicaSet(t testing.TB, e *env, n, people int, extra ...string) *replicaSet {
	t.Helper()
	rs := &replicaSet{e: e, sl: slacktest.New(), logs: &syncBuffer{}, hc: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(rs.sl.Close)
	allowed := make([]string, people)
	for i := range allowed {
		allowed[i] = fmt.Sprintf("slack:U%d", i)
	}
	environ := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir(),
		"OPENAI_API_KEY=" + e.cfg.OpenAIKey, "OPENAI_BASE_URL=" + e.cfg.OpenAIBaseURL, "OPENAI_MODEL=" + e.cfg.OpenAIModel,
		"TODOIST_TOKEN=" + e.cfg.TodoistToken, "TODOIST_API_URL=" + e.cfg.TodoistURL,
		"TIDYBOT_DB=" + e.cfg.DB, "TIDYBOT_DATABASE_URL=" + e.cfg.DatabaseURL, "TIDYBOT_METRICS_ADDR=",
		"TIDYBOT_MAX_TOKENS=" + strconv.Itoa(e.cfg.MaxTokens), "TIDYBOT_LOG_LEVEL=info",
		"SLACK_BOT_TOKEN=" + slacktest.Token, "SLACK_SIGNING_SECRET=" + slackSecret, "SLACK_API_URL=" + rs.sl.URL,
		"TIDYBOT_ALLOWED_USERS=" + strings.Join(allowed, ",")}
	environ = append(environ, extra...)
	for i := range n {
		env := environ
		if *replicaProf != "" {
			name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
			env = append(slices.Clip(environ), "TIDYBOT_CPU_PROFILE="+filepath.Join(*replicaProf, fmt.Sprintf("%s-%d.prof", name, i)))
		}
		rs.replicas = append(rs.replicas, startReplica(t, env, rs.logs))
	}
	return rs
}

// instruction is person p's message m.
func instruction(p, m int) string { return fmt.Sprintf("add task p%d m%d", p, m) }

// send posts person p's message m to replica k, or, when it does not
// take it (killed meanwhile), to the next, as a load balancer does; a
// retry has the same event id, as Slack's own retries do, or the same
// update, as Telegram redelivers an update its webhook did not confirm.
func (rs *replicaSet) send(t testing.TB, p, m, k int) {
	ts := fmt.Sprintf("%d.%06d", 1700000000+m, p)
	body := slacktest.MessageEvent(fmt.Sprintf("EvR%d-%d", p, m), fmt.Sprint("D", p), "im", fmt.Sprint("U", p), instruction(p, m), ts, "")
	path := "/slack/events"
	if rs.onTelegram(p) {
		body, path = telegramtest.Update(p*100000+m+1, tgUser(p), tgUser(p), instruction(p, m)), "/telegram/webhook"
	}
	for try := 0; ; try++ {
		r := rs.replicas[(k+try)%len(rs.replicas)]
		req, _ := http.NewRequest(http.MethodPost, r.base+path, bytes.NewReader(body))
		now := strconv.FormatInt(time.Now().Unix(), 10)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Slack-Request-Timestamp", now)
		req.Header.Set("X-Slack-Signature", slacktest.Sign(slackSecret, now, body))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", tgSecret)
		resp, err := rs.hc.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				if rs.acked != nil {
					rs.acked[p].Add(1)
				}
				return
			}
		}
		if try > 200 {
			t.Errorf("message %d of person %d taken by no replica: %v", m, p, err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendAll sends each person's messages in order (each acknowledged
// before the next), people side by side, spread over the replicas.
func (rs *replicaSet) sendAll(t testing.TB, people, each int) {
	var wg sync.WaitGroup
	for p := range people {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for m := range each {
				rs.send(t, p, m, p+m)
			}
		}()
	}
	wg.Wait()
}

// allAnswers is the answers posted to each of people 0…people-1 (Slack
// users in their DM D<p>, or on Telegram: onTelegram), in the order
// posted, read in one pass over each fake's messages: a poll of every
// person costs the fakes one copy of what they hold, not one a person,
// and holds their locks (which the replicas' posts wait for) once.
func (rs *replicaSet) allAnswers(people int) [][]string {
	out := make([][]string, people)
	for _, post := range rs.sl.AllPosts() {
		ch, dm := strings.CutPrefix(post.Channel, "D")
		p, err := strconv.Atoi(ch)
		if !dm || err != nil || p < 0 || p >= people || rs.onTelegram(p) {
			continue
		}
		if a, ok := strings.CutPrefix(post.Text, "Added: "); ok {
			out[p] = append(out[p], a)
		}
	}
	if rs.tg == nil {
		return out
	}
	for _, msg := range rs.tg.AllMessages() {
		p := int(msg.ChatID - tgUser(0))
		if p < 0 || p >= people || !rs.onTelegram(p) {
			continue
		}
		if a, ok := strings.CutPrefix(msg.Text, "Added: "); ok {
			out[p] = append(out[p], a)
		}
	}
	return out
}

// TestReplicasSurviveKills runs three `tidybot serve` replicas on one
// PostgreSQL database against the fake Slack, Telegram (by webhook),
// model and Todoist: people each send their messages in order (each one
// a run that writes a task to Todoist, then answers), the even ones on
// Slack, the odd ones on Telegram, POSTed to the replicas in turn, while
// one replica after another is SIGKILLed every -replica-kill-every and
// started again. Every message must be answered, in its conversation's
// order, and every task written once; on Slack no answer is shown
// twice. On Telegram the bot cannot ask what was shown, so a kill right
// after a post and before the outbox entry's removal shows that answer
// again (docs/architecture.md, "Every answer is delivered"): such
// answers are counted apart, and there may be no more of them than
// answers another replica claimed from a dead one (how many a kill
// catches between post and removal grows with the answers under way:
// 5 with 4 kills once the test's own polling was cheap, so a count per
// kill is no bound). It also measures, for
// each stop (takeovers), how soon the conversations the stopped replica
// held with a message unanswered are answered again, and fails when one
// waits longer than the lease time plus 5 s; a conversation answered
// only after a later stop is counted apart. By default 400 messages
// from 40 people (CI time); the size is -replica-msgs 2000
// -replica-people 200.
func TestReplicasSurviveKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tidybot serve many times")
	}
	e := newEnv(t)
	e.cfg.DatabaseURL = pgtest.URL(t)
	people := *replicaPeople
	each := max(*replicaMsgs/people, 1)
	total := people * each
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	rs := newReplicaSet(t, e, 3, people, withTelegram(tg, people)...)
	rs.tg = tg
	var proxies []*pgtest.Proxy
	if *replicaCut > 0 {
		// Each replica reaches the database through a relay of its own,
		// which a cut makes drop every byte either way without closing
		// anything (a network cut, not a closed socket).
		pu, err := url.Parse(e.cfg.DatabaseURL)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs.replicas {
			p := pgtest.NewProxy(t, pu.Host)
			proxies = append(proxies, p)
			r.environ = append(r.environ, "TIDYBOT_DATABASE_URL="+p.Via(t, e.cfg.DatabaseURL))
			r.kill()
			r.start()
		}
	}
	rs.acked = make([]atomic.Int64, people)
	tk := newTakeovers(t, rs, people, e.cfg.DatabaseURL)
	done, watchDone := make(chan struct{}), make(chan struct{})
	watched := make(chan struct{})
	go func() { defer close(watched); tk.watch(watchDone) }()
	var measured sync.WaitGroup
	var kills, freezes, cuts atomic.Int64 // kills counts every disruption
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for k := 0; ; k++ {
			select {
			case <-done:
				return
			case <-time.After(*replicaKill):
			}
			r := rs.replicas[k%len(rs.replicas)]
			kills.Add(1)
			if *replicaCut > 0 && k%3 == 2 {
				cuts.Add(1)
				p := proxies[k%len(rs.replicas)]
				tk.stop(t, &measured, "cut", p.Cut)
				select {
				case <-done:
				case <-time.After(*replicaCut):
				}
				// The connections the cut made dead close, as the TCP
				// keepalives of both ends do on a real network well
				// within a 30 s cut; new ones go through.
				p.CloseAll()
				p.Heal()
				continue
			}
			if *replicaFreeze > 0 && k%2 == 1 {
				freezes.Add(1)
				tk.stop(t, &measured, "SIGSTOP", func() { r.freeze(*replicaFreeze) })
				continue
			}
			tk.stop(t, &measured, "SIGKILL", r.kill)
			r.start()
		}
	}()
	start := time.Now()
	rs.sendAll(t, people, each)
	answered := func() int {
		n := 0
		for _, got := range rs.allAnswers(people) {
			seen := map[string]bool{}
			for _, a := range got {
				seen[a] = true
			}
			n += len(seen)
		}
		return n
	}
	deadline := time.Now().Add(2 * time.Minute)
	for answered() < total && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	close(done)
	<-killed
	measured.Wait()
	close(watchDone)
	<-watched
	tk.report(t)
	// What the last kill left is posted by the survivors.
	time.Sleep(500 * time.Millisecond)
	for deadline := time.Now().Add(30 * time.Second); answered() < total && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d messages from %d people (%d on Slack, %d on Telegram), 3 replicas, %d SIGKILLs, %d SIGSTOPs of %v and %d database cuts of %v in %v",
		total, people, (people+1)/2*each, people/2*each, kills.Load()-freezes.Load()-cuts.Load(), freezes.Load(), *replicaFreeze, cuts.Load(), *replicaCut, time.Since(start).Round(time.Millisecond))
	if *replicaLogs != "" {
		if err := os.WriteFile(*replicaLogs, []byte(rs.logs.String()), 0o644); err != nil {
			t.Errorf("write the replicas' logs: %v", err)
		}
	}
	var lost, twice, tgTwice, disorder int
	for p, got := range rs.allAnswers(people) {
		seen := map[string]int{}
		next := 0
		for _, a := range got {
			seen[a]++
			if seen[a] > 1 {
				continue
			}
			if a != strings.TrimPrefix(instruction(p, next), "add task ") {
				disorder++
				t.Errorf("person %d: answer %q posted where m%d was due (all: %v)", p, a, next, got)
			}
			next++
		}
		for m := range each {
			switch n := seen[strings.TrimPrefix(instruction(p, m), "add task ")]; {
			case n == 0:
				lost++
			case n > 1 && rs.onTelegram(p):
				tgTwice += n - 1
				t.Logf("Telegram: person %d's answer to m%d shown %d times (a kill right after its post)", p, m, n)
			case n > 1:
				twice++
			}
		}
	}
	written := map[string]int{}
	for _, task := range e.todo.Tasks() {
		written[task.Content]++
	}
	var doubled, unwritten int
	for p := range people {
		for m := range each {
			switch n := written[strings.TrimPrefix(instruction(p, m), "add task ")]; {
			case n == 0:
				unwritten++
			case n > 1:
				doubled++
			}
		}
	}
	// An answer shown again on Telegram is one a dead replica posted
	// before its outbox entry's removal, which another then claimed and
	// posted: there are at most as many as entries claimed so.
	claims := regexp.MustCompile(`msg="posting messages a stopped process left unsent" count=(\d+)`).FindAllStringSubmatch(rs.logs.String(), -1)
	claimed := 0
	for _, c := range claims {
		n, _ := strconv.Atoi(c[1])
		claimed += n
	}
	t.Logf("runs resumed by another replica or a restart: %d; answers a dead replica left, posted by another: %d in %d batches",
		strings.Count(rs.logs.String(), "resuming run"), claimed, len(claims))
	t.Logf("leases lost by a replica (a frozen one at its next beat): %d; writes refused after another took the lease: %d",
		strings.Count(rs.logs.String(), "lost the leases of this process"), strings.Count(rs.logs.String(), "lease lost: this process stopped"))
	t.Logf("lost %d, answered twice on Slack %d, shown again on Telegram %d (with %d kills; at most one per answer claimed from a dead replica, %d), out of order %d, writes doubled %d, writes missing %d",
		lost, twice, tgTwice, kills.Load(), claimed, disorder, doubled, unwritten)
	if lost+twice+disorder+doubled+unwritten > 0 || tgTwice > claimed {
		logs := rs.logs.String()
		if len(logs) > 20000 {
			logs = logs[len(logs)-20000:]
		}
		t.Errorf("lost %d, answered twice on Slack %d, shown again on Telegram %d with %d kills and %d answers claimed from dead replicas, out of order %d, writes doubled %d, writes missing %d; logs:\n%s",
			lost, twice, tgTwice, kills.Load(), claimed, disorder, doubled, unwritten, logs)
	}
}

// BenchmarkReplicaThroughput sends 2,000 messages from 200 people (each
// person's in order, people side by side, each message a run that
// writes a task to Todoist and answers) to `tidybot serve` processes on
// one store, with the fake Slack, model and Todoist answering at once,
// and reports messages per second from the first POST to the last
// answer, and the serves' CPU time a message (all of it, start and stop
// included; not PostgreSQL's): one replica on bbolt, one on PostgreSQL, two on PostgreSQL
// (POSTs spread over them). The serves, the fakes and the senders share
// the machine's cores, so that on a small machine a second replica
// brings none: PostgreSQL's CPU and the machine's (all of it, the
// fakes' too) a message are reported beside, from the first POST to
// the last answer. With -replica-cpus n, each serve is limited to n
// cores (limitCPU), as a container's CPU limit does: a replica then
// brings its own share. With -replica-cpuprofile dir, each serve writes
// a CPU profile there (the last run of each case).
//
//	go test ./cmd/tidybot -run '^$' -bench ReplicaThroughput -benchtime 1x [-args -replica-cpus 0.5]
func BenchmarkReplicaThroughput(b *testing.B) {
	const people, each = 200, 10
	for _, c := range []struct {
		name     string
		postgres bool
		replicas int
	}{{"bbolt-1", false, 1}, {"postgres-1", true, 1}, {"postgres-2", true, 2}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				e := newEnv(b)
				e.cfg.DatabaseURL = ""
				if c.postgres {
					e.cfg.DatabaseURL = pgtest.URL(b)
				}
				rs := newReplicaSet(b, e, c.replicas, people, "TIDYBOT_LOG_LEVEL=error")
				if *replicaCPUs > 0 {
					for _, r := range rs.replicas {
						limitCPU(b, r.cmd.Process.Pid, *replicaCPUs)
					}
				}
				start, pg0, all0 := time.Now(), postgresCPU(), machineCPU()
				rs.sendAll(b, people, each)
				// Answers are streamed (chat.startStream/stopStream) or
				// posted: count them, not chat.postMessage calls.
				answered := func() int {
					n := 0
					for _, got := range rs.allAnswers(people) {
						n += len(got)
					}
					return n
				}
				n := 0
				for deadline := time.Now().Add(5 * time.Minute); n < people*each; time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d answered", n, people*each)
					}
					n = answered()
				}
				elapsed, pg, all := time.Since(start), postgresCPU()-pg0, machineCPU()-all0
				if n != people*each {
					b.Errorf("%d of %d answered", n, people*each)
				}
				b.ReportMetric(float64(people*each)/elapsed.Seconds(), "msgs/s")
				perMsg := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(people*each) }
				if c.postgres && pg > 0 {
					b.ReportMetric(perMsg(pg), "pg-cpu-ms/msg")
				}
				b.ReportMetric(perMsg(all), "machine-cpu-ms/msg")
				var cpu time.Duration // the serves', start and stop included
				for _, r := range rs.replicas {
					r.stop()
					r.mu.Lock()
					if st := r.cmd.ProcessState; st != nil {
						cpu += st.UserTime() + st.SystemTime()
					}
					r.mu.Unlock()
				}
				b.ReportMetric(perMsg(cpu), "serve-cpu-ms/msg")
			}
		})
	}
}

// TestButtonPressAtAnotherReplica: a run that waits for a confirmation
// asked on one replica is resumed by a press that reaches another,
// which finds the run in the database (the first is stopped before the
// press, so that only the other can take it).
func TestButtonPressAtAnotherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tidybot serve twice")
	}
	e := newEnv(t)
	e.cfg.DatabaseURL = pgtest.URL(t)
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	rs := newReplicaSet(t, e, 2, 1)
	a, b := rs.replicas[0].base, rs.replicas[1].base
	if code := postSigned(t, a+"/slack/events", "application/json", slacktest.MessageEvent("EvB1", "D0", "im", "U0", "delete the cake task", "2.1", ""), slackSecret); code != 200 {
		t.Fatalf("dm: %d", code)
	}
	waitFor(t, "the confirmation", func() bool { return len(lastPost(rs.sl, "D0").Buttons) == 2 })
	q := lastPost(rs.sl, "D0")
	rs.replicas[0].stop()
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": "tr1", "user": map[string]any{"id": "U0"}, "channel": map[string]any{"id": "D0"},
		"container": map[string]any{"type": "message", "message_ts": q.TS, "channel_id": "D0"},
		"actions":   []map[string]any{{"type": "button", "action_id": "choice_0", "block_id": "choices", "value": q.Buttons[0]}}})
	if code := postSigned(t, b+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(url.Values{"payload": {string(payload)}}.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	waitFor(t, "the deletion", func() bool { return lastPost(rs.sl, "D0").Text == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 0 {
		t.Errorf("tasks left: %d, want 0", n)
	}
	if n := strings.Count(fmtPosts(rs.sl.Posts("D0")), "Deleted the cake task."); n != 1 {
		t.Errorf("the answer was posted %d times", n)
	}
}

// TestSlashCommandAnsweredByAnotherReplica: a slash command in a private
// channel the bot is not in reaches one replica, which is SIGKILLed once
// the run has started; the other replica's answer comes through the
// command's response_url, which it finds in PostgreSQL.
func TestSlashCommandAnsweredByAnotherReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tidybot serve twice")
	}
	e := newEnv(t)
	e.cfg.DatabaseURL = pgtest.URL(t)
	e.todo.SeedTalkInbox()
	e.model.SetLatency(time.Second) // the run is under way when the replica dies
	rs := newReplicaSet(t, e, 2, 2)
	rs.sl.NotMember("G9") // a private channel the bot was never added to
	form := rs.sl.SlashCommand("G9", "U1", "/tidy-inbox", "")
	if code := postSigned(t, rs.replicas[0].base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("command: %d", code)
	}
	waitFor(t, "the run's first model call", func() bool { return e.model.Calls() > 0 })
	rs.replicas[0].kill()
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastPost(rs.sl, "G9").Shown(), "Moved ") })
	for _, p := range rs.sl.Posts("G9") {
		if !p.ResponseURL || !p.Ephemeral {
			t.Errorf("post %+v: want it through the command's response_url, to the user", p)
		}
	}
}

// takeovers measures how soon, after a replica is stopped (SIGKILLed,
// SIGSTOPped or cut from the database), the conversations it held are
// answered: for each stop, the conversations whose lease the stopped
// replica held with a message taken and not yet answered, and for each
// of them the time from the stop to the next answer posted there (by
// another replica, or by the killed one started again). The stopped
// replica's id is the holder in a snapshot of leases taken right before
// the stop whose beat, looked at takeoverLook later, was not renewed
// after it (a live replica beats every 2 s).
type takeovers struct {
	rs     *replicaSet
	people int
	db     *pgxpool.Pool

	mu       sync.Mutex // protects the fields below
	answerAt [][]time.Time
	waits    map[string][]time.Duration // by kind of stop, one per conversation and stop
	none     int                        // conversations never answered again
	stops    []time.Time                // when each stop began
	// overlaps is the waits of conversations answered only after a
	// later stop (of the replica that had taken them over, as often as
	// not): counted under that stop too, when its replica held them.
	overlaps []time.Duration
}

// takeoverLook is how long after a stop its replica's beat is looked at.
const takeoverLook = 6 * time.Second

func newTakeovers(t testing.TB, rs *replicaSet, people int, dbURL string) *takeovers {
	t.Helper()
	db, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatalf("connect to measure takeovers: %v", err)
	}
	t.Cleanup(db.Close)
	return &takeovers{rs: rs, people: people, db: db, answerAt: make([][]time.Time, people), waits: map[string][]time.Duration{}}
}

// watch notes when each answer is first seen, every 50 ms, until done.
func (tk *takeovers) watch(done <-chan struct{}) {
	for {
		now := time.Now()
		for p, got := range tk.rs.allAnswers(tk.people) {
			seen := map[string]bool{}
			for _, a := range got {
				seen[a] = true
			}
			tk.mu.Lock()
			for len(tk.answerAt[p]) < len(seen) {
				tk.answerAt[p] = append(tk.answerAt[p], now)
			}
			tk.mu.Unlock()
		}
		select {
		case <-done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// person is the person whose conversation key is, or -1.
func (tk *takeovers) person(key string) int {
	f := strings.Split(key, ":")
	if len(f) < 2 {
		return -1
	}
	var p int
	var err error
	switch f[0] {
	case "slack":
		p, err = strconv.Atoi(strings.TrimPrefix(f[1], "D"))
	case "telegram":
		p, err = strconv.Atoi(f[1])
		p -= int(tgUser(0))
	default:
		return -1
	}
	if err != nil || p < 0 || p >= tk.people {
		return -1
	}
	return p
}

// stop takes the snapshot, runs fault (the stop, of kind) and, in the
// background, measures what it left; wg counts the measurements.
func (tk *takeovers) stop(t testing.TB, wg *sync.WaitGroup, kind string, fault func()) {
	ctx := context.Background()
	held := map[string][]int{} // holder → people
	var dbStop time.Time
	rows, err := tk.db.Query(ctx, `SELECT thread_key, owner, now() FROM leases WHERE owner IS NOT NULL`)
	if err == nil {
		for rows.Next() {
			var key, owner string
			if err = rows.Scan(&key, &owner, &dbStop); err != nil {
				break
			}
			if p := tk.person(key); p >= 0 {
				held[owner] = append(held[owner], p)
			}
		}
		rows.Close()
		err = rows.Err()
	}
	if err == nil && dbStop.IsZero() {
		err = tk.db.QueryRow(ctx, `SELECT now()`).Scan(&dbStop)
	}
	// The answers are counted afresh, not from watch's notes, which lag
	// (by far more than their 50 ms on a loaded machine): a person whose
	// last answer was posted but not yet noted looked pending, and was
	// counted "never answered again".
	var pending []int // people with a message taken and not answered
	for p, got := range tk.rs.allAnswers(tk.people) {
		acked := tk.rs.acked[p].Load()
		answered := map[string]bool{}
		for _, a := range got {
			answered[a] = true
		}
		if acked > int64(len(answered)) {
			pending = append(pending, p)
		}
	}
	at := time.Now()
	tk.mu.Lock()
	tk.stops = append(tk.stops, at)
	tk.mu.Unlock()
	if err != nil {
		t.Errorf("leases before a stop: %v", err)
		fault()
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(takeoverLook)  // from the stop: a freeze may last longer
		live := map[string]bool{} // beat since the stop
		rows, err := tk.db.Query(ctx, `SELECT id FROM replicas WHERE beat > $1`, dbStop)
		if err != nil {
			t.Errorf("beats after a stop: %v", err)
			return
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Errorf("beats after a stop: %v", err)
				break
			}
			live[id] = true
		}
		rows.Close()
		var mine []int
		for owner, people := range held {
			if !live[owner] {
				for _, p := range people {
					if slices.Contains(pending, p) {
						mine = append(mine, p)
					}
				}
			}
		}
		// The answer due is the first one posted after the stop.
		for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			tk.mu.Lock()
			var waits, overlaps []time.Duration
			for _, p := range mine {
				for _, a := range tk.answerAt[p] {
					if !a.After(at) {
						continue
					}
					if slices.ContainsFunc(tk.stops, func(s time.Time) bool { return s.After(at) && s.Before(a) }) {
						overlaps = append(overlaps, a.Sub(at))
					} else {
						waits = append(waits, a.Sub(at))
					}
					break
				}
			}
			if len(waits)+len(overlaps) == len(mine) || time.Now().After(deadline) {
				tk.waits[kind] = append(tk.waits[kind], waits...)
				tk.overlaps = append(tk.overlaps, overlaps...)
				tk.none += len(mine) - len(waits) - len(overlaps)
				tk.mu.Unlock()
				return
			}
			tk.mu.Unlock()
		}
	}()
	fault()
}

// report logs the longest and the median wait, in all and by kind of
// stop, and fails t when the longest is over the lease time plus 5 s.
func (tk *takeovers) report(t testing.TB) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	var all []time.Duration
	for _, kind := range []string{"SIGKILL", "SIGSTOP", "cut"} {
		if w := tk.waits[kind]; len(w) > 0 {
			longest, median := spread(w)
			t.Logf("takeovers after a %s: %d conversations, answered again in at most %v, median %v, first %v", kind, len(w), longest, median, slices.Min(w).Round(time.Millisecond))
			all = append(all, w...)
		}
	}
	if len(all) == 0 {
		t.Logf("takeovers: no stop left a held conversation with a message unanswered (%d never answered again)", tk.none)
		return
	}
	longest, median := spread(all)
	t.Logf("takeovers: %d conversations a stopped replica held with a message unanswered, answered again after the stop in at most %v, median %v (%d never answered again)",
		len(all), longest, median, tk.none)
	if len(tk.overlaps) > 0 {
		l, m := spread(tk.overlaps)
		t.Logf("takeovers cut short by a later stop, not counted above: %d conversations, answered in at most %v, median %v after the first", len(tk.overlaps), l, m)
	}
	if limit := replicaLeaseTime + 5*time.Second; longest > limit {
		t.Errorf("a stopped replica's conversation waited %v for an answer, over the lease time plus 5 s (%v)", longest, limit)
	}
	if tk.none > 0 {
		t.Errorf("%d conversations a stopped replica held were never answered again", tk.none)
	}
}

// spread is the longest and the median of w, to the millisecond.
func spread(w []time.Duration) (longest, median time.Duration) {
	w = slices.Clone(w)
	sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
	return w[len(w)-1].Round(time.Millisecond), w[len(w)/2].Round(time.Millisecond)
}
