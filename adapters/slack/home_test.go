package slack_test

import (
	"context"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
)

// homeRecorder is a handler that also opens Homes (slack.HomeOpener).
type homeRecorder struct {
	recorder
	mu     sync.Mutex
	opened []string // "user team"
}

func (r *homeRecorder) OpenHome(_ context.Context, platform, userID, teamID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.opened = append(r.opened, platform+" "+userID+" "+teamID)
	return nil
}

func (r *homeRecorder) opens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.opened...)
}

// homeOpenedHandled: app_home_opened is answered 200 and opens the
// person's Home, as no message.
func homeOpenedHandled(t *testing.T, a *slack.Adapter, srv *slacktest.Server) {
	t.Helper()
	rec := &homeRecorder{}
	w := httptest.NewRecorder()
	a.EventsHandler(rec).ServeHTTP(w, signed(t, "/slack/events", "application/json", srv.AppHomeOpened("U1"), secret, time.Now()))
	if got := rec.opens(); w.Code != 200 || len(rec.got()) != 0 || len(got) != 1 || got[0] != "slack U1 T1" {
		t.Errorf("app_home_opened: status %d, handled %+v, opened %q", w.Code, rec.got(), got)
	}
}

// TestHomePressFromTheHome: a press on the Home tab (a block_actions of
// a home view, no channel) reaches the bot as the button's data, in
// the bot's own IM with the presser (where a Connect link would go).
func TestHomePressFromTheHome(t *testing.T) {
	a, srv := newAdapter(t)
	h := bot.Home{Allowed: true, Settings: []bot.HomeSetting{{Label: "Autopilot", Value: "off",
		Buttons: []bot.Button{{Label: "Turn autopilot on", Data: bot.HomePrefix + "set:autopilot:on"}}}}}
	if err := a.PublishHome(t.Context(), "U1", h); err != nil {
		t.Fatal(err)
	}
	form, err := srv.HomePress("U1", bot.HomePrefix+"set:autopilot:on")
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	w := httptest.NewRecorder()
	a.InteractivityHandler(rec).ServeHTTP(w, signed(t, "/slack/interactivity", "application/x-www-form-urlencoded", []byte(form.Encode()), secret, time.Now()))
	got := rec.got()
	if w.Code != 200 || len(got) != 1 || got[0].Button != bot.HomePrefix+"set:autopilot:on" || got[0].UserID != "U1" || got[0].ChatID != srv.IM("U1") || !got[0].DM || got[0].TeamID != "T1" {
		t.Fatalf("status %d, handled %+v", w.Code, got)
	}
}

// TestHomeKeepsBlockKitLimits: a Home with more settings and longer
// texts than Block Kit takes is published within its limits (100
// blocks, 3,000 characters a section, 75 a button), which the fake
// enforces as Slack does.
func TestHomeKeepsBlockKitLimits(t *testing.T) {
	a, srv := newAdapter(t)
	h := bot.Home{Allowed: true, Notice: strings.Repeat("n", 5000)}
	for range 80 {
		h.Settings = append(h.Settings, bot.HomeSetting{Label: "L", Value: strings.Repeat("v", 4000),
			Buttons: []bot.Button{{Label: strings.Repeat("b", 100), Data: bot.HomePrefix + "set:x:y"}}})
	}
	if err := a.PublishHome(t.Context(), "U1", h); err != nil {
		t.Fatal(err)
	}
	got, ok := srv.HomeOf("U1")
	if !ok || len(got.Sections) == 0 || len(got.Labels) == 0 {
		t.Fatalf("published %+v", got)
	}
	// Autopilot's filings, long ones, each with its Undo.
	h = bot.Home{Allowed: true, Settings: h.Settings[:5]}
	for i := range 5 {
		h.Filings = append(h.Filings, bot.HomeFiling{Text: strings.Repeat("f", 5000), Undo: bot.Button{Label: "↩️ Undo", Data: bot.HomePrefix + "u:R" + strconv.Itoa(i)}})
	}
	if err := a.PublishHome(t.Context(), "U2", h); err != nil {
		t.Fatal(err)
	}
	got, _ = srv.HomeOf("U2")
	if !slices.Contains(got.Buttons, bot.HomePrefix+"u:R4") || !strings.Contains(got.Shown(), "Autopilot's last filings") {
		t.Errorf("the filings' Undo not drawn: %q", got.Buttons)
	}
}

// TestHomeNotAllowedShowsNoSettings: a person the bot does not serve
// sees the notice and no controls.
func TestHomeNotAllowedShowsNoSettings(t *testing.T) {
	a, srv := newAdapter(t)
	h := bot.Home{Notice: "Sorry, not allowed", Settings: []bot.HomeSetting{{Label: "Autopilot", Value: "off"}}}
	if err := a.PublishHome(t.Context(), "U9", h); err != nil {
		t.Fatal(err)
	}
	got, _ := srv.HomeOf("U9")
	if !strings.Contains(got.Shown(), "Sorry, not allowed") || strings.Contains(got.Shown(), "Autopilot") || len(got.Buttons) != 0 {
		t.Errorf("shown %q, buttons %q", got.Shown(), got.Buttons)
	}
}
