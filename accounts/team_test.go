package accounts

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
)

// memSettings is the part of the store team mode uses, in memory.
type memSettings struct {
	mu     sync.Mutex
	kv     map[string]string
	events map[string]bool
}

func (m *memSettings) Setting(_ context.Context, k string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.kv[k]
	if !ok {
		return "", bot.ErrNotFound
	}
	return v, nil
}

func (m *memSettings) SetSetting(_ context.Context, k, v string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.kv[k] = v
	return nil
}

func (m *memSettings) MarkEvent(_ context.Context, k string, _ time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.events[k] {
		return false, nil
	}
	m.events[k] = true
	return true, nil
}

func newTestTeam(t *testing.T, key byte, st *memSettings, old ...byte) *Team {
	t.Helper()
	o := &todoist.OAuth{ClientID: "cid", ClientSecret: "csecret", AuthURL: "https://todoist.example"}
	keys := [][]byte{bytes.Repeat([]byte{key}, 32)}
	for _, k := range old {
		keys = append(keys, bytes.Repeat([]byte{k}, 32))
	}
	tm, err := New(Config{Secrets: keys, Store: st, OAuth: o, NewAgent: func(string) bot.Agent { return nil }, Redact: agent.NewRedactor("csecret")})
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func stateOf(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("state")
}

func TestStateExpiresAndIsSingleUse(t *testing.T) {
	st := &memSettings{kv: map[string]string{}, events: map[string]bool{}}
	tm := newTestTeam(t, 1, st)
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	tm.now = func() time.Time { return now }
	in := bot.Incoming{Platform: "slack", UserID: "U1", ChatID: "D1", DM: true}
	link, err := tm.ConnectURL(t.Context(), in)
	if err != nil {
		t.Fatal(err)
	}
	expired := stateOf(t, link)
	now = now.Add(StateTTL + time.Second)
	if _, err := tm.checkState(t.Context(), expired); !errors.Is(err, errState) {
		t.Errorf("a state %s old: %v, want refused", StateTTL+time.Second, err)
	}
	link, _ = tm.ConnectURL(t.Context(), in)
	s := stateOf(t, link)
	other := newTestTeam(t, 2, st) // another TIDYBOT_SECRET_KEY
	other.now = tm.now
	if _, err := other.checkState(t.Context(), s); !errors.Is(err, errState) {
		t.Errorf("a state signed with another key: %v, want refused", err)
	}
	got, err := tm.checkState(t.Context(), s)
	if err != nil || got.UserID != "U1" || got.Platform != "slack" || got.ChatID != "D1" {
		t.Fatalf("a fresh state: %+v, %v", got, err)
	}
	if _, err := tm.checkState(t.Context(), s); !errors.Is(err, errState) {
		t.Errorf("a state used twice: %v, want refused", err)
	}
	for _, bad := range []string{"", "x", s + "x", "." + strings.Split(s, ".")[1]} {
		if _, err := tm.checkState(t.Context(), bad); !errors.Is(err, errState) {
			t.Errorf("state %q: %v, want refused", bad, err)
		}
	}
}

func TestCallbackRefusesBadStateStoringNothing(t *testing.T) {
	st := &memSettings{kv: map[string]string{}, events: map[string]bool{}}
	tm := newTestTeam(t, 1, st)
	for _, q := range []string{"code=c&state=forged.sig", "error=access_denied&state=x", "code=c"} {
		w := httptest.NewRecorder()
		tm.callback(w, httptest.NewRequest(http.MethodGet, CallbackPath+"?"+q, nil))
		if w.Code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", q, w.Code)
		}
	}
	if len(st.kv) != 0 {
		t.Errorf("stored %v after refused callbacks", st.kv)
	}
}

func TestTokensAreSealedPerPerson(t *testing.T) {
	st := &memSettings{kv: map[string]string{}, events: map[string]bool{}}
	tm := newTestTeam(t, 1, st)
	const tok = "a-todoist-token-0123456789"
	rec := tm.seal("slack", "U1", tok)
	if strings.Contains(rec, tok) {
		t.Fatal("the sealed record holds the token in clear")
	}
	if got, _, err := tm.open("slack", "U1", rec); err != nil || got != tok {
		t.Fatalf("open: %q, %v", got, err)
	}
	if _, _, err := tm.open("slack", "U2", rec); err == nil {
		t.Error("Alice's record opened as Bob's")
	}
	if _, _, err := newTestTeam(t, 2, st).open("slack", "U1", rec); err == nil || !strings.Contains(err.Error(), "TIDYBOT_SECRET_KEY") || strings.Contains(err.Error(), tok) {
		t.Errorf("another key: %v, want an error naming TIDYBOT_SECRET_KEY", err)
	}
	st.kv[tokenKey("slack", "U1")] = rec
	if _, err := tm.Agent(t.Context(), "slack", "U1"); err != nil {
		t.Fatal(err)
	}
	if got := tm.redact.String("token " + tok); strings.Contains(got, tok) {
		t.Errorf("a loaded token is not redacted: %q", got)
	}
	if _, err := tm.Agent(t.Context(), "slack", "U9"); !errors.Is(err, bot.ErrNotConnected) {
		t.Errorf("a person never connected: %v, want ErrNotConnected", err)
	}
}

// TestKeyRotation: with TIDYBOT_SECRET_KEY=new,old a token sealed with
// the old key still works and is sealed again with the new one; without
// the old key the person is asked to connect again.
func TestKeyRotation(t *testing.T) {
	st := &memSettings{kv: map[string]string{}, events: map[string]bool{}}
	old := newTestTeam(t, 1, st)
	const tok = "a-todoist-token-0123456789"
	st.kv[tokenKey("slack", "U1")] = old.seal("slack", "U1", tok)
	link, _ := old.ConnectURL(t.Context(), bot.Incoming{Platform: "slack", UserID: "U2", ChatID: "D2"})

	rotating := newTestTeam(t, 2, st, 1)
	if got, err := rotating.token(t.Context(), "slack", "U1"); err != nil || got != tok {
		t.Fatalf("a token sealed with the old key: %q, %v", got, err)
	}
	if _, err := rotating.checkState(t.Context(), stateOf(t, link)); err != nil {
		t.Errorf("a Connect link signed with the old key during the rotation: %v", err)
	}
	newOnly := newTestTeam(t, 2, st)
	if got, err := newOnly.token(t.Context(), "slack", "U1"); err != nil || got != tok {
		t.Errorf("after one use the token is sealed with the new key: %q, %v", got, err)
	}
	st.kv[tokenKey("slack", "U3")] = old.seal("slack", "U3", tok)
	if _, err := newOnly.Agent(t.Context(), "slack", "U3"); !errors.Is(err, bot.ErrNotConnected) {
		t.Errorf("a token no key opens: %v, want ErrNotConnected (connect again)", err)
	}
}

// TestConnectCookieAttributes: the cookie that binds the flow to the
// browser is HttpOnly, SameSite=Lax (sent on Todoist's redirect back, a
// top-level navigation), scoped to the OAuth paths, and Secure when
// TIDYBOT_PUBLIC_URL is https.
func TestConnectCookieAttributes(t *testing.T) {
	for _, public := range []string{"http://bot.example.com", "https://bot.example.com"} {
		st := &memSettings{kv: map[string]string{}, events: map[string]bool{}}
		tm := newTestTeam(t, 1, st)
		tm.public = public
		link, err := tm.ConnectURL(t.Context(), bot.Incoming{Platform: "telegram", UserID: "43", UserName: "mallory", ChatID: "43", DM: true})
		if err != nil || !strings.HasPrefix(link, public+ConnectPath+"?state=") {
			t.Fatalf("link %q, %v", link, err)
		}
		w := httptest.NewRecorder()
		tm.connectPage(w, httptest.NewRequest(http.MethodGet, link, nil))
		cs := w.Result().Cookies()
		if len(cs) != 1 {
			t.Fatalf("%d cookies", len(cs))
		}
		c := cs[0]
		if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/oauth/todoist/" || c.Secure != strings.HasPrefix(public, "https") || c.MaxAge <= 0 {
			t.Errorf("%s: cookie %+v", public, c)
		}
		if w.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: the page may be framed", public)
		}
	}
}
