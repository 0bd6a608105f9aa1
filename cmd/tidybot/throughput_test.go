package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

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
// environment of the test is not passed on, but for GOGC and
// GOMEMLIMIT), and waits for /healthz.
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
	// The Go runtime's GC settings of the test's environment are passed
	// on, to measure their effect (docs/performance.md).
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GOGC=") || strings.HasPrefix(kv, "GOMEMLIMIT=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
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
// /proc/<pid>/stat (fields 14 and 15), or 0 where /proc does not tell.
func cpuTime(pid int) time.Duration {
	_, f, ok := procStat(strconv.Itoa(pid))
	if !ok || len(f) < 13 {
		return 0
	}
	return clockTicks(f, 11, 12)
}

// procStat returns the command name (field 2) in /proc/<pid>/stat and
// the fields after it (f[0] is field 3); ok is false where /proc does
// not tell.
func procStat(pid string) (name string, f []string, ok bool) {
	raw, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "", nil, false
	}
	// The command name is in parentheses and may hold spaces.
	i, j := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if i < 0 || j < i {
		return "", nil, false
	}
	return string(raw[i+1 : j]), strings.Fields(string(raw[j+1:])), true
}

// clockTicks is the sum of fields ks of f, counts of clock ticks (1/100
// s on Linux), as a duration.
func clockTicks(f []string, ks ...int) time.Duration {
	var ticks int
	for _, k := range ks {
		n, _ := strconv.Atoi(f[k])
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond
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

// postgresCPU is the CPU time, user plus system, of the PostgreSQL
// server's processes on this machine so far: every process named
// postgres, with what its ended children used (fields 16 and 17, which
// the postmaster gathers from the backends it reaps). It is 0 where
// /proc does not tell or the server runs elsewhere.
func postgresCPU() time.Duration {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var total time.Duration
	for _, d := range dirs {
		if _, err := strconv.Atoi(d.Name()); err != nil {
			continue
		}
		if name, f, ok := procStat(d.Name()); ok && name == "postgres" && len(f) >= 15 {
			total += clockTicks(f, 11, 12, 13, 14)
		}
	}
	return total
}

// machineCPU is the CPU time all of this machine's cores have spent
// busy so far (/proc/stat's first line: user, nice, system, irq and
// softirq), or 0 where /proc does not tell.
func machineCPU() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 8 || f[0] != "cpu" {
		return 0
	}
	return clockTicks(f, 1, 2, 3, 6, 7)
}
