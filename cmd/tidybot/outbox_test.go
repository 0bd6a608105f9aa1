package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
)

// armedText picks out the one platform call that posts the armed text,
// once: the kill tests' proxies arm it with the answer to catch.
type armedText struct {
	mu   sync.Mutex // protects text
	text string
}

func (a *armedText) arm(text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.text = text
}

// take reports whether r's form posts the armed text, disarming it if so;
// r's body stays readable for the next handler.
func (a *armedText) take(w http.ResponseWriter, r *http.Request) (hit, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	form, _ := url.ParseQuery(string(body))
	var j struct {
		Content string `json:"content"` // Discord's JSON body
	}
	_ = json.Unmarshal(body, &j)
	a.mu.Lock()
	defer a.mu.Unlock()
	hit = a.text != "" && (form.Get("text") == a.text || (j.Content != "" && j.Content == a.text) || a.text == ackHold)
	if hit {
		a.text = ""
	}
	return hit, true
}

// ackHold, armed, holds the next call, a reaction (setMessageReaction)
// or a message: the 👀 is its own call beside the run (bot/ack.go), so
// the run's answer may go first, and a kill after a post is the case
// Telegram shows twice (documented), not this one.
const ackHold = "👀"

// disarm disarms the text, reporting whether it was armed.
func (a *armedText) disarm() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	armed := a.text != ""
	a.text = ""
	return armed
}

// holdProxy stands between tidybot and the fake Telegram: it holds the
// sendMessage call whose text is the armed one (never passing it
// on) and reports it, so that the test can kill tidybot exactly while
// the final answer is being posted.
type holdProxy struct {
	armedText
	next http.Handler
	held chan struct{}
	// frozen, from a hold until the held process is dead, holds every
	// call: the process is killed at the held call, so nothing it would
	// send after it (the answer of a run that went on beside a held 👀)
	// reaches Telegram.
	frozen atomic.Bool
}

func (p *holdProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p.frozen.Load() {
		_, _ = io.Copy(io.Discard, r.Body) // the server sees the client go only once the body is read
		<-r.Context().Done()
		return
	}
	if strings.HasSuffix(r.URL.Path, "/sendMessage") || strings.HasSuffix(r.URL.Path, "/setMessageReaction") {
		hold, ok := p.take(w, r)
		if !ok {
			return
		}
		if hold {
			p.frozen.Store(true)
			p.held <- struct{}{}
			<-r.Context().Done() // until the process is killed
			return
		}
	}
	p.next.ServeHTTP(w, r)
}

// TestKillWhilePostingTheAnswerLosesNothing runs `tidybot serve` with
// the fake Telegram and SIGKILLs it right after the model's final reply,
// while the answer's sendMessage is in flight (the run is saved as done
// by then), 50 times (5 with -short); each restart must post the answer
// that the kill cut off, once.
func TestKillWhilePostingTheAnswerLosesNothing(t *testing.T) {
	tries := 50
	if testing.Short() {
		tries = 5
	}
	killTest(t, tries, func(i int) string { return fmt.Sprintf("You said: note %d", i) })
}

// TestKillRightAfterTheAckLosesNothing kills tidybot while its first
// call after storing a message (the 👀, or the answer if it goes first)
// is in flight (10 times, 3 with -short): the
// restart runs the stored message and posts its answer once.
func TestKillRightAfterTheAckLosesNothing(t *testing.T) {
	tries := 10
	if testing.Short() {
		tries = 3
	}
	killTest(t, tries, func(int) string { return ackHold })
}

// killTest sends tries messages; for each it kills tidybot while the
// sendMessage whose text is hold(i) is in flight, restarts it, and
// checks that message i's answer is then posted, once.
func killTest(t *testing.T, tries int, hold func(i int) string) {
	e := newEnv(t)
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	target, err := url.Parse(tg.URL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0) // the killed process's calls
	proxy := &holdProxy{next: rp, held: make(chan struct{}, 1)}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	bin := tidybotBinary(t)
	environ := append(os.Environ(),
		"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+e.model.URL, "OPENAI_MODEL=scripted",
		"TODOIST_TOKEN="+e.todo.Token, "TODOIST_API_URL="+e.todo.URL, "TIDYBOT_DB="+e.cfg.DB,
		"TELEGRAM_BOT_TOKEN="+tg.Token, "TELEGRAM_API_URL="+front.URL, "TIDYBOT_ALLOWED_USERS=telegram:42",
		"TIDYBOT_HTTP_ADDR=127.0.0.1:0", "TIDYBOT_METRICS_ADDR=", "TIDYBOT_LOG_LEVEL=warn")
	var logs bytes.Buffer
	var logMu sync.Mutex
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "serve")
		cmd.Env = environ
		w := &lockedWriter{mu: &logMu, w: &logs}
		cmd.Stdout, cmd.Stderr = w, w
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	delivered := func(want string) int {
		n := 0
		for _, m := range tg.Messages(42) {
			if m.Text == want {
				n++
			}
		}
		return n
	}
	began := time.Now()
	proc := start()
	defer func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	}()
	for i := range tries {
		want := fmt.Sprintf("You said: note %d", i)
		proxy.arm(hold(i))
		tg.PushText(42, 42, fmt.Sprintf("note %d", i))
		select {
		case <-proxy.held:
		case <-time.After(20 * time.Second):
			logMu.Lock()
			defer logMu.Unlock()
			t.Fatalf("try %d: the answer was never posted; logs:\n%s", i, logs.String())
		}
		_ = proc.Process.Signal(syscall.SIGKILL)
		_ = proc.Wait()
		proxy.frozen.Store(false)
		if n := delivered(want); n != 0 && hold(i) == want {
			t.Fatalf("try %d: the held answer reached Telegram", i)
		}
		proc = start() // the restart; the next try kills it in turn
		deadline := time.Now().Add(20 * time.Second)
		for delivered(want) == 0 {
			if time.Now().After(deadline) {
				logMu.Lock()
				defer logMu.Unlock()
				t.Fatalf("try %d: the answer of the message cut off by the kill was not posted after the restart; logs:\n%s", i, logs.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := range tries {
		if n := delivered(fmt.Sprintf("You said: note %d", i)); n != 1 {
			t.Errorf("answer %d posted %d times, want once", i, n)
		}
	}
	t.Logf("%d kills while posting %q, none lost, in %v", tries, hold(0), time.Since(began).Round(time.Millisecond))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRefusalFloodUnderRateLimit: 100 messages from a user who is not
// allowed, while Telegram answers 429 to sendMessage three times, make
// one refusal: 4 sendMessage calls in all (before: one refusal per
// message, each in its own goroutine retrying the 429s, 103 calls).
func TestRefusalFloodUnderRateLimit(t *testing.T) {
	e := newEnv(t)
	tg := serveTelegram(t, e)
	tg.RateLimit("sendMessage", 3)
	for i := range 100 {
		tg.PushText(7, 666, fmt.Sprint("spam ", i))
	}
	waitFor(t, "the refusal", func() bool { return strings.Contains(lastText(tg, 7), "telegram:666") })
	waitFor(t, "every update handled", func() bool { return tg.Pending() == 0 })
	if n := len(tg.Messages(7)); n != 1 {
		t.Errorf("%d messages to the unknown user, want 1 refusal", n)
	}
	if n := tg.Calls("sendMessage"); n != 4 {
		t.Errorf("sendMessage called %d times, want 4 (3 answered 429, then the refusal)", n)
	}
}
