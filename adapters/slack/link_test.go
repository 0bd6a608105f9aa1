package slack_test

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

func TestDetailsLinkOnlyForTheAsker(t *testing.T) {
	a, srv := newAdapter(t)
	link := &bot.Link{Label: "Details", URL: "https://bot.example.com/runs/r1?sig=s", UserID: "U1"}

	// In a DM the button is on the answer.
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "D1", Text: "Done.", Link: link}); err != nil {
		t.Fatal(err)
	}
	ps := srv.Posts("D1")
	if len(ps) != 1 || len(ps[0].URLs) != 1 || ps[0].URLs[0] != link.URL || ps[0].Labels[0] != "Details" || ps[0].Shown() != "Done." {
		t.Fatalf("DM posts: %+v", ps)
	}

	// In a channel the answer has no link; the asker alone gets it.
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "C1", ThreadID: "1.1", Text: "Done.", Link: link}); err != nil {
		t.Fatal(err)
	}
	ps = srv.Posts("C1")
	if len(ps) != 2 {
		t.Fatalf("channel posts: %+v", ps)
	}
	if ps[0].Ephemeral || len(ps[0].URLs) != 0 {
		t.Errorf("the answer everyone sees carries the link: %+v", ps[0])
	}
	if e := ps[1]; !e.Ephemeral || e.User != "U1" || e.ThreadTS != "1.1" || len(e.URLs) != 1 || e.URLs[0] != link.URL {
		t.Errorf("ephemeral link: %+v", e)
	}
}

func TestDetailsClickIsAcknowledgedAndIgnored(t *testing.T) {
	a, _ := newAdapter(t)
	rec := &recorder{}
	payload, _ := json.Marshal(map[string]any{
		"type": "block_actions", "trigger_id": "t3", "user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "D1"},
		"container": map[string]any{"type": "message", "message_ts": "5.5", "channel_id": "D1"},
		"actions":   []map[string]any{{"type": "button", "action_id": "details", "block_id": "link", "url": "https://bot.example.com/runs/r1?sig=s"}},
	})
	body := url.Values{"payload": {string(payload)}}.Encode()
	w := httptest.NewRecorder()
	a.InteractivityHandler(rec).ServeHTTP(w, signed(t, "/slack/interactivity", "application/x-www-form-urlencoded", []byte(body), secret, time.Now()))
	if w.Code != 200 {
		t.Fatalf("HTTP %d", w.Code)
	}
	if got := rec.got(); len(got) != 0 {
		t.Errorf("opening the Details link reached the bot as %+v", got)
	}
}
