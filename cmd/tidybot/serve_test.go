package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/web"
)

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// freeAddr returns a local address nothing listens on, for a serve
// that binds it a moment later. Its port is below the kernel's
// ephemeral range (ip_local_port_range), from which every listener on
// port 0 is given one (httptest servers, fakes, other packages' tests
// running at the same time): one given the port in that moment took a
// serve's requests (CI: TestSlackHomeConnectDisconnectAndModel's
// event answered 401 by another server, 10 ms into the test).
func freeAddr(t testing.TB) string {
	t.Helper()
	low := 32768 // Linux's default start of the range
	if raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(raw)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 12000 {
				low = n
			}
		}
	}
	for range 100 {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+rand.IntN(low-10000))))
		if err != nil {
			continue // taken
		}
		defer ln.Close()
		return ln.Addr().String()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// running is a `tidybot serve` started by startServe.
type running struct {
	base string // http://TIDYBOT_HTTP_ADDR
	logs *syncBuffer
	stop func() // cancels serve and waits for it to return
}

// startServe runs `tidybot serve` with e's config (on a free port, logs
// kept) until the test ends or stop is called.
func startServe(t testing.TB, e *env, timeouts *web.Timeouts) *running {
	t.Helper()
	return startMain(t, e, func(m *Main) { m.timeouts = timeouts })
}

// startMain is startServe with set applied to the Main before it runs.
func startMain(t testing.TB, e *env, set func(*Main)) *running {
	t.Helper()
	e.cfg.HTTPAddr = freeAddr(t)
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	m := &Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: io.Discard, Stderr: logs}
	set(m)
	go func() { done <- m.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
			_ = m.Close()
		})
	}
	t.Cleanup(stop)
	r := &running{base: "http://" + e.cfg.HTTPAddr, logs: logs, stop: stop}
	waitServing(t, r.base, done, logs)
	return r
}

// waitServing waits until the serve at base answers /healthz, failing t
// if it ends first (its result on ended) with its logs.
func waitServing(t testing.TB, base string, ended <-chan error, logs *syncBuffer) {
	t.Helper()
	waitFor(t, "the HTTP server", func() bool {
		select {
		case err := <-ended:
			t.Fatalf("serve ended: %v\n%s", err, logs.String())
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeMetricsOnItsOwnAddress(t *testing.T) {
	e := newEnv(t)
	e.cfg.MetricsAddr = freeAddr(t)
	s := startServe(t, e, nil)
	if code, body := get(t, s.base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	code, body := get(t, "http://"+e.cfg.MetricsAddr+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics on TIDYBOT_METRICS_ADDR = %d", code)
	}
	for _, want := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _ := get(t, s.base+"/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the webhook port = %d, want 404", code)
	}
	if code, _ := get(t, "http://"+e.cfg.MetricsAddr+"/healthz"); code != http.StatusNotFound {
		t.Errorf("/healthz on the metrics port = %d, want 404", code)
	}
}

func TestServeMetricsOff(t *testing.T) {
	e := newEnv(t)
	e.cfg.MetricsAddr = ""
	s := startServe(t, e, nil)
	if code, _ := get(t, s.base+"/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics on the webhook port = %d, want 404", code)
	}
	if strings.Contains(s.logs.String(), "serving /metrics") {
		t.Errorf("metrics served though TIDYBOT_METRICS_ADDR is empty:\n%s", s.logs.String())
	}
}

func TestServeMetricsAddrInUse(t *testing.T) {
	e := newEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	e.cfg.HTTPAddr, e.cfg.MetricsAddr = freeAddr(t), ln.Addr().String()
	err = (&Main{Args: []string{"serve"}, Config: &e.cfg, Stdout: io.Discard, Stderr: io.Discard}).Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "TIDYBOT_METRICS_ADDR") {
		t.Errorf("err = %v, want it to name TIDYBOT_METRICS_ADDR", err)
	}
}

// cutOff dials addr, writes first, then dribbles one byte every 50 ms,
// and returns how long the server kept the connection and what it said.
func cutOff(t *testing.T, addr, first string, limit time.Duration) (time.Duration, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, first); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopped:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte("a")); err != nil {
					return
				}
			}
		}
	}()
	defer close(stopped)
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	said, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return limit, string(said) // still held
	}
	return time.Since(start), string(said)
}

func TestServeCutsOffSlowClients(t *testing.T) {
	e := newEnv(t)
	s := startServe(t, e, &web.Timeouts{ReadHeader: 300 * time.Millisecond, Read: 600 * time.Millisecond, Write: time.Second, Idle: time.Second, MaxHeaderBytes: 4 << 10})
	addr := strings.TrimPrefix(s.base, "http://")
	const limit = 4 * time.Second
	t.Run("slow body", func(t *testing.T) {
		held, _ := cutOff(t, addr, "POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", limit)
		if held >= limit {
			t.Errorf("a client dribbling its body was still held after %v", limit)
		}
	})
	t.Run("slow headers", func(t *testing.T) {
		held, _ := cutOff(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", limit)
		if held >= limit {
			t.Errorf("a client dribbling its headers was still held after %v", limit)
		}
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		_ = conn.SetReadDeadline(time.Now().Add(limit))
		_, err = conn.Read(make([]byte, 1))
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Errorf("an idle connection was still open after %v: %v", limit, err)
		}
	})
	t.Run("header size cap", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, _ = io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 64<<10)+"\r\n\r\n")
		_ = conn.SetReadDeadline(time.Now().Add(limit))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("no answer to a 64 KB header: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", resp.StatusCode)
		}
	})
}

func TestServeShutdownLogsWhatItWaitedFor(t *testing.T) {
	e := newEnv(t)
	e.cfg.LogLevel = "info"
	s := startServe(t, e, nil)
	s.stop()
	logs := s.logs.String()
	for _, want := range []string{"shutting down: signal received", "shutdown: HTTP servers stopped", "shutdown: runs stopped or checkpointed", "waited="} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
}

func TestServeLogFormatJSON(t *testing.T) {
	e := newEnv(t)
	e.cfg.LogLevel, e.cfg.LogFormat = "info", "json"
	s := startServe(t, e, nil)
	s.stop()
	lines := strings.Split(strings.TrimSpace(s.logs.String()), "\n")
	if len(lines) < 3 {
		t.Fatalf("logs:\n%s", s.logs.String())
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, `{"time":`) {
			t.Errorf("not a JSON line: %s", l)
		}
	}
}

func TestHealth(t *testing.T) {
	health := func(addr string) (string, error) {
		var out bytes.Buffer
		cfg := Config{HTTPAddr: addr}
		err := (&Main{Args: []string{"health"}, Config: &cfg, Stdout: &out, Stderr: io.Discard}).Run(t.Context())
		return out.String(), err
	}
	e := newEnv(t)
	s := startServe(t, e, nil)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.base, "http://"))
	for _, addr := range []string{e.cfg.HTTPAddr, ":" + port, "0.0.0.0:" + port} {
		if out, err := health(addr); err != nil || out != "ok\n" {
			t.Errorf("health with serve on %s: %q, %v", addr, out, err)
		}
	}

	for _, tt := range []struct {
		name, addr, want string
	}{
		{"nothing listening", freeAddr(t), "connection refused"},
		{"bad address", "8080", "TIDYBOT_HTTP_ADDR"},
		{"not ok", unhealthy(t), "HTTP 503"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := health(tt.addr)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line with %q", err, tt.want)
			}
		})
	}
}

// unhealthy is a server whose /healthz answers 503.
func unhealthy(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}
