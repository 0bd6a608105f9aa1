package inspector

import (
	"github.com/tidybot/tidybot/bot"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

func serveRun(t *testing.T, src Source, signer *Signer, red *agent.Redactor, id, sig string) *httptest.ResponseRecorder {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("GET /runs/{id}", NewHandler(src, signer, red, nil))
	req := httptest.NewRequest(http.MethodGet, "/runs/"+url.PathEscape(id)+"?sig="+url.QueryEscape(sig), nil)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

func TestPageSignature(t *testing.T) {
	now := t0
	signer, err := NewSigner(testKey, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSigner([]byte("another key, also 32 bytes long!"), func() time.Time { return now })
	src := memSource{"run1": questionRun(t, "run1", "Buy cake"), "run2": questionRun(t, "run2", "Call mum")}
	good := signer.Sign("run1", time.Hour)
	exp, mac, _ := strings.Cut(good, ".")
	tests := []struct {
		name     string
		id, sig  string
		later    time.Duration
		wantCode int
	}{
		{"valid", "run1", good, 0, http.StatusOK},
		{"valid until just before it expires", "run1", good, 59 * time.Minute, http.StatusOK},
		{"expired", "run1", good, time.Hour, http.StatusNotFound},
		{"missing", "run1", "", 0, http.StatusNotFound},
		{"garbage", "run1", "not-a-signature", 0, http.StatusNotFound},
		{"expiry moved later", "run1", "9999999999." + mac, 0, http.StatusNotFound},
		{"mac altered", "run1", exp + "." + strings.Repeat("A", len(mac)), 0, http.StatusNotFound},
		{"another run's signature", "run2", good, 0, http.StatusNotFound},
		{"another key", "run1", other.Sign("run1", time.Hour), 0, http.StatusNotFound},
		{"unknown run, valid signature", "nope", signer.Sign("nope", time.Hour), 0, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now = t0.Add(tt.later)
			defer func() { now = t0 }()
			rec := serveRun(t, src, signer, nil, tt.id, tt.sig)
			if rec.Code != tt.wantCode {
				t.Fatalf("HTTP %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			body := rec.Body.String()
			if tt.wantCode == http.StatusOK && !strings.Contains(body, "clean up Buy cake") {
				t.Errorf("the page does not show the request:\n%s", body)
			}
			if tt.wantCode != http.StatusOK && strings.Contains(body, "clean up") {
				t.Errorf("a refused request shows the run: %s", body)
			}
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
				t.Errorf("CSP %q", csp)
			}
			if rp := rec.Header().Get("Referrer-Policy"); rp != "no-referrer" {
				t.Errorf("Referrer-Policy %q: the signed address would leak to linked sites", rp)
			}
		})
	}
}

func TestSignerRefusesShortKey(t *testing.T) {
	if _, err := NewSigner([]byte("short"), nil); err == nil {
		t.Fatal("a 5-byte key was accepted")
	}
}

func TestLink(t *testing.T) {
	signer, _ := NewSigner(testKey, func() time.Time { return t0 })
	link := signer.Link("https://bot.example.com/", "r 1", DefaultTTL)
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	if u.Path != "/runs/r 1" || u.Host != "bot.example.com" {
		t.Errorf("link %s", link)
	}
	if !signer.Verify("r 1", u.Query().Get("sig")) {
		t.Errorf("the link's own signature does not verify: %s", link)
	}
}

func TestPageEscapesHostileContentAndRedactsSecrets(t *testing.T) {
	hostile := `<script>alert("x")</script><img src=x onerror=alert(1)> sk-SECRET-token-123`
	signer, _ := NewSigner(testKey, func() time.Time { return t0 })
	src := memSource{"r": questionRun(t, "r", hostile)}
	red := agent.NewRedactor("sk-SECRET-token-123")
	rec := serveRun(t, src, signer, red, "r", signer.Sign("r", time.Hour))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, bad := range []string{"<script", "<img", "onerror=alert(1)>", "sk-SECRET-token-123"} {
		if strings.Contains(body, bad) {
			t.Errorf("the page contains %q", bad)
		}
	}
	if n := strings.Count(body, "&lt;script&gt;"); n < 5 {
		t.Errorf("the task name shows as text %d times, want it in the request, thought, arguments, observation, answer and write", n)
	}
}

func TestPageQuestionGatedWriteUndo(t *testing.T) {
	signer, _ := NewSigner(testKey, func() time.Time { return t0 })
	run := questionRun(t, "r", "Buy cake")
	run.Feedback = &bot.Feedback{Rating: bot.FeedbackGood, At: t0}
	src := memSource{"r": run}
	rec := serveRun(t, src, signer, nil, "r", signer.Sign("r", time.Hour))
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{
		"clean up Buy cake",    // the request
		"Deleted Buy cake",     // the answer
		"❓ Delete which task?", // the question
		"(T1 / T2)",            // its options
		"💬 T1",                 // the answer given
		"delete_tasks</span> <span class=\"badge write\">write</span>", // the gated write
		"✓ deleted T1 Buy cake",                                        // its Todoist result
		"deleted “Buy cake”",                                           // the journal
		"badge undone",                                                 // undone
		"waited 45.0s for you",                                         // the confirmation's wait
		"waited 2h0m0s for you",                                        // the question's wait
		"1,500 + 40 tokens",                                            // per model call
		"model 1.2s",                                                   // its latency
		"Todoist projects</th><td class=\"n\">310ms",                   // per Todoist request
		"Todoist apply</th><td class=\"n\">420ms",
		"4 calls · 3.6s · 6,900 prompt + 107 completion tokens", // totals
		"3 requests · 980ms",
		"<svg", `class="wait cut"`, // the timeline; the 2h wait is drawn cut
		"<details><summary>",              // the long observation is clipped
		"END-OF-OBSERVATION",              // and all of it is there behind <details>
		"💭 I need the projects first.",    // a thought
		"Rated 👍 by the person who asked", // the asker's feedback
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(body, "earlier answer") {
		t.Error("a message of an earlier run shows as a step")
	}
	if got := strings.Count(body, `class="card step"`); got != 4 {
		t.Errorf("%d steps, want 4", got)
	}
}
