package slack_test

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

// TestResponseURLIsItsPersons: in a DM between U1 and U2 (the bot no
// member), U1's /tidy-inbox, then a button press by U2 and U2's /tidy
// help: U1's run posts only through U1's response_url, U2's reply only
// through U2's; U2's press replaces nothing (issue 33, defect 4). No
// chat.postMessage is tried in a DM the bot cannot be in (defect 5).
func TestResponseURLIsItsPersons(t *testing.T) {
	a, srv := newAdapter(t)
	srv.NotMember("D9")
	slash := func(user, cmd, text string) {
		t.Helper()
		form := srv.SlashCommand("D9", user, cmd, text)
		rec := &recorder{}
		w := httptest.NewRecorder()
		a.CommandsHandler(rec).ServeHTTP(w, signed(t, "/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
		if got := rec.got(); w.Code != 200 || len(got) != 1 || got[0].DM {
			t.Fatalf("%s: status %d, handled %+v; want one event, not the bot's own DM", cmd, w.Code, got)
		}
	}
	press := func(user string) {
		t.Helper()
		hook := srv.SlashCommand("D9", user, "/tidy", "").Get("response_url") // a response_url of user's, as a press carries
		payload, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": "tp", "user": map[string]any{"id": user}, "channel": map[string]any{"id": "D9"},
			"response_url": hook, "actions": []map[string]any{{"type": "button", "action_id": "choice_0", "value": "f:r0:g"}}})
		body := url.Values{"payload": {string(payload)}}.Encode()
		w := httptest.NewRecorder()
		a.InteractivityHandler(&recorder{}).ServeHTTP(w, signed(t, "/slack/interactivity", "application/x-www-form-urlencoded", []byte(body), secret, time.Now()))
		if w.Code != 200 {
			t.Fatalf("%s's press: HTTP %d", user, w.Code)
		}
	}
	ctx := t.Context()
	slash("U1", "/tidy-inbox", "")
	run := bot.Outgoing{ChatID: "D9", UserID: "U1", RunID: "r1", Text: "🤔 Working on it…"}
	status, err := a.Send(ctx, run)
	if err != nil {
		t.Fatalf("U1's status message: %v", err)
	}
	press("U2") // a button press by another person there
	slash("U2", "/tidy", "help")
	if _, err := a.Send(ctx, bot.Outgoing{ChatID: "D9", UserID: "U2", Text: "help text"}); err != nil {
		t.Fatalf("U2's help: %v", err)
	}
	run.Text = "🤔 Working on it…\n🔎 reading the inbox"
	if err := a.Edit(ctx, status, run); err != nil {
		t.Fatalf("U1's progress: %v", err)
	}
	run.Text = "ALICE-PRIVATE: your overdue task"
	if _, err := a.Send(ctx, run); err != nil {
		t.Fatalf("U1's answer: %v", err)
	}
	if n := srv.Calls("chat.postMessage") + srv.Calls("chat.update"); n != 0 {
		t.Errorf("%d calls to chat.postMessage or chat.update in a DM the bot is not in, want 0 (each is refused)", n)
	}
	if _, err := a.Send(ctx, bot.Outgoing{ChatID: "D9", Text: "to nobody in particular"}); err == nil {
		t.Error("a message naming no person was posted through someone's response_url")
	}
	var u1, u2 int
	for _, p := range srv.Posts("D9") {
		switch {
		case !p.ResponseURL || !p.Ephemeral:
			t.Errorf("post %q: want an ephemeral answer through a response_url", p.Shown())
		case p.User == "U1" && strings.Contains(p.Shown(), "help text"):
			t.Errorf("U2's help went to U1: %q", p.Shown())
		case p.User == "U1":
			u1++
		case strings.Contains(p.Shown(), "ALICE") || strings.Contains(p.Shown(), "Working"):
			t.Errorf("U1's message went to %s: %q", p.User, p.Shown())
		default:
			u2++
		}
	}
	if u1 != 3 || u2 != 1 {
		t.Errorf("U1 saw %d posts, U2 %d; want 3 and 1", u1, u2)
	}
}
