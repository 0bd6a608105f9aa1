package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// BenchmarkSlackThroughput posts 2,000 signed Slack message events (2,000
// DMs, so no channel's posting limit paces them) from 200 concurrent
// senders to `tidybot serve`, with the fake Slack, model and Todoist
// answering at once, and waits for every answer. The bot is the built
// binary in its own process, as in production, so that its memory and CPU
// are its own: the fakes and the senders run in the benchmark's process.
// It reports messages per second from the first POST to the last answer,
// the p50 and p99 time to acknowledge a POST, the bot's peak resident
// memory (VmHWM) and its CPU time per message (user + system), and the
// CPU time per message of the benchmark's own process (fakes and
// senders), which shares the machine's cores with the bot.
// TIDYBOT_BENCH_WORKERS sets the bot's workers (default 4,
// TIDYBOT_WORKERS' default); TIDYBOT_BENCH_CPU_PROFILE and
// TIDYBOT_BENCH_TRACE name files for the bot's CPU profile and runtime
// trace (its TIDYBOT_CPU_PROFILE and TIDYBOT_TRACE).
//
//	go test ./cmd/tidybot -run '^$' -bench SlackThroughput -benchtime 1x
//	TIDYBOT_BENCH_TRACE=/tmp/bot.trace go test ./cmd/tidybot -run '^$' -bench SlackThroughput -benchtime 1x
//	go tool trace -pprof=sync /tmp/bot.trace > sync.prof; go tool pprof -top -cum sync.prof
func BenchmarkSlackThroughput(b *testing.B) {
	const total, senders = 2000, 200
	for round := range b.N {
		e := newEnv(b)
		sl := slacktest.New()
		workers := "4"
		if w := os.Getenv("TIDYBOT_BENCH_WORKERS"); w != "" {
			workers = w
		}
		s := startServeProcess(b, e, "SLACK_BOT_TOKEN="+slacktest.Token, "SLACK_SIGNING_SECRET="+slackSecret, "SLACK_API_URL="+sl.URL,
			"TIDYBOT_ALLOWED_USERS=slack:U1", "TIDYBOT_WORKERS="+workers,
			"TIDYBOT_CPU_PROFILE="+os.Getenv("TIDYBOT_BENCH_CPU_PROFILE"), "TIDYBOT_TRACE="+os.Getenv("TIDYBOT_BENCH_TRACE"))
		base := s.base
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}, Timeout: 30 * time.Second}
		acks := make([]time.Duration, total)
		selfCPU := cpuTime(os.Getpid())
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for range senders {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= total {
						return
					}
					body := slacktest.MessageEvent(fmt.Sprint("Ev", round, "-", i), fmt.Sprint("D", i), "im", "U1", "hello", fmt.Sprint(i, ".1"), "")
					req, _ := http.NewRequest(http.MethodPost, base+"/slack/events", bytes.NewReader(body))
					ts := strconv.FormatInt(time.Now().Unix(), 10)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Slack-Request-Timestamp", ts)
					req.Header.Set("X-Slack-Signature", slacktest.Sign(slackSecret, ts, body))
					t0 := time.Now()
					resp, err := hc.Do(req)
					acks[i] = time.Since(t0)
					if err != nil {
						b.Error(err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("event %d: %d", i, resp.StatusCode)
					}
				}
			}()
		}
		wg.Wait()
		answered := func() int {
			n := 0
			for i := range total {
				for _, p := range sl.Posts(fmt.Sprint("D", i)) {
					if strings.HasPrefix(p.Text, "You said") {
						n++
						break
					}
				}
			}
			return n
		}
		// Each message posts its status message and its answer (posted,
		// or streamed and ended by chat.stopStream); the fake's call
		// counters are cheap to poll, reading every post is not.
		for deadline := time.Now().Add(5 * time.Minute); sl.Calls("chat.postMessage")+sl.Calls("chat.stopStream") < 2*total; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d answered", answered(), total)
			}
		}
		elapsed := time.Since(start)
		if n := answered(); n != total {
			b.Errorf("%d of %d answered", n, total)
		}
		// Each run answered in one step, so each status message is
		// settled ("✅ Done") once: none is left "Working on it…".
		if n := sl.Calls("chat.update"); n != total {
			b.Errorf("%d status messages settled, want %d", n, total)
		}
		rss, cpu, fakesCPU := peakRSS(s.pid), cpuTime(s.pid), cpuTime(os.Getpid())-selfCPU
		s.stop()
		sl.Close()
		slices.Sort(acks)
		b.ReportMetric(total/elapsed.Seconds(), "msgs/s")
		b.ReportMetric(float64(acks[total/2].Microseconds())/1000, "ack-p50-ms")
		b.ReportMetric(float64(acks[total*99/100].Microseconds())/1000, "ack-p99-ms")
		b.ReportMetric(rss, "bot-RSS-MiB")
		b.ReportMetric(float64(cpu.Microseconds())/1000/total, "bot-CPU-ms/msg")
		b.ReportMetric(float64(fakesCPU.Microseconds())/1000/total, "fakes-CPU-ms/msg")
	}
}

// process is a `tidybot serve` started by startServeProcess.
type process struct {
	base string
	pid  int
	stop func()
}

var (
	buildOnce sync.Once
	buildDir  string // removed by TestMain
	builtBin  string
	buildErr  error
)

// tidybotBinary builds the tidybot binary once per test process, for the
// tests that run it as its own process.
func tidybotBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "tidybot-test")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(buildDir, "tidybot")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return builtBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// startServeProcess starts the built binary's `tidybot serve` against
// e's fakes, with only the settings given here and in extra (the
// environment of the test is not passed on), and waits for /healthz.
func startServeProcess(t testing.TB, e *env, extra ...string) *process {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(tidybotBinary(t), "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(),
		"OPENAI_API_KEY=" + e.cfg.OpenAIKey, "OPENAI_BASE_URL=" + e.cfg.OpenAIBaseURL, "OPENAI_MODEL=" + e.cfg.OpenAIModel,
		"TODOIST_TOKEN=" + e.cfg.TodoistToken, "TODOIST_API_URL=" + e.cfg.TodoistURL,
		"TIDYBOT_DB=" + e.cfg.DB, "TIDYBOT_HTTP_ADDR=" + addr, "TIDYBOT_METRICS_ADDR=",
		"TIDYBOT_MAX_TOKENS=" + strconv.Itoa(e.cfg.MaxTokens), "TIDYBOT_LOG_LEVEL=error",
	}, extra...)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("serve: %v\n%s", err, logs.String())
				}
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				t.Errorf("serve did not stop within 30 s of SIGTERM\n%s", logs.String())
			}
		})
	}
	t.Cleanup(stop)
	p := &process{base: "http://" + addr, pid: cmd.Process.Pid, stop: stop}
	waitServing(t, p.base, exited, logs)
	return p
}

// cpuTime is a process's user plus system CPU time so far, from
// /proc/<pid>/stat (fields 14 and 15, in clock ticks of 1/100 s on
// Linux), or 0 where /proc does not tell.
func cpuTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(raw[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// peakRSS is a process's peak resident memory in MiB (VmHWM), or 0
// where /proc does not tell.
func peakRSS(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}
