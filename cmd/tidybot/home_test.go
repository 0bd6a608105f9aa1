package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// TestSlackHomeShowsAndChangesSettings: opening the App Home tab
// publishes the person's settings; a press there changes the setting as
// /settings does (the same stored settings, read back by /settings) and
// publishes the Home again, saying what changed.
func TestSlackHomeShowsAndChangesSettings(t *testing.T) {
	e := newEnv(t)
	sl, base := serveSlack(t, e)

	// Set through /settings first: the Home shows it.
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev1", "D1", "im", "U1", "/settings confirm never", "1.1", ""), slackSecret); code != 200 {
		t.Fatalf("settings: %d", code)
	}
	waitFor(t, "the settings' answer", func() bool { return strings.Contains(lastPost(sl, "D1").Shown(), "I'll ask never") })

	if code := postSigned(t, base+"/slack/events", "application/json", sl.AppHomeOpened("U1"), slackSecret); code != 200 {
		t.Fatalf("app_home_opened: %d", code)
	}
	home, _ := sl.HomeOf("U1")
	if home.Publishes != 1 {
		t.Fatalf("no Home published when it was opened: %+v", home)
	}
	for _, want := range []string{"Autopilot: off", "Confirm: never (never)", "Morning digest: off", "Time zone: Todoist's", "Language: the one you write in", "Today you used 0 model tokens."} {
		if !slices.Contains(home.Sections, want) {
			t.Errorf("the Home lacks %q: %q", want, home.Sections)
		}
	}

	// Autopilot on, from the Home.
	press, err := sl.HomePress("U1", "home:set:autopilot:on")
	if err != nil {
		t.Fatal(err)
	}
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(press.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	home, _ = sl.HomeOf("U1")
	if home.Publishes != 2 || !slices.Contains(home.Sections, "Autopilot: on (project, section, labels, due date)") ||
		!strings.Contains(home.Shown(), "Autopilot is on") || !slices.Contains(home.Buttons, "home:set:autopilot:off") {
		t.Errorf("the Home after autopilot on: %+v", home)
	}
	// Confirmations, from the Home.
	press, err = sl.HomePress("U1", "home:set:confirm:writes")
	if err != nil {
		t.Fatal(err)
	}
	_ = postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(press.Encode()), slackSecret)
	// The same press again (Slack's retry) changes nothing more.
	_ = postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(press.Encode()), slackSecret)
	home, _ = sl.HomeOf("U1")
	if home.Publishes != 3 || !slices.Contains(home.Sections, "Confirm: writes (before every change)") {
		t.Errorf("the Home after confirm writes: %+v", home)
	}

	// /settings reads what the Home set.
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev2", "D1", "im", "U1", "/settings", "2.1", ""), slackSecret); code != 200 {
		t.Fatalf("settings: %d", code)
	}
	waitFor(t, "the settings", func() bool { return strings.Contains(lastPost(sl, "D1").Shown(), "• Autopilot: on") })
	if s := lastPost(sl, "D1").Shown(); !strings.Contains(s, "• Confirm: writes (before every change)") {
		t.Errorf("/settings after the Home's presses:\n%s", s)
	}
}

// TestSlackHomeOfSomeoneNotAllowed: a person the bot does not serve
// opening the Home sees that, with their id, and no settings.
func TestSlackHomeOfSomeoneNotAllowed(t *testing.T) {
	e := newEnv(t)
	sl, base := serveSlack(t, e)
	if code := postSigned(t, base+"/slack/events", "application/json", sl.AppHomeOpened("U666"), slackSecret); code != 200 {
		t.Fatalf("app_home_opened: %d", code)
	}
	home, ok := sl.HomeOf("U666")
	if !ok || !strings.Contains(home.Shown(), "slack:U666") || strings.Contains(home.Shown(), "Autopilot") || len(home.Buttons) != 0 {
		t.Errorf("the Home of someone not allowed: %+v", home)
	}
}

// TestSlackHomeOverSocketMode: the same over Socket Mode: the opened
// Home is published and its envelope acknowledged; a press there
// changes the setting and publishes the Home again.
func TestSlackHomeOverSocketMode(t *testing.T) {
	e := newEnv(t)
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackAppToken, e.cfg.SlackURL = slacktest.Token, slacktest.AppToken, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1"}
	serve(t, e)
	waitFor(t, "the Socket Mode connection", sl.Connected)
	var opened map[string]any
	if err := json.Unmarshal(sl.AppHomeOpened("U1"), &opened); err != nil {
		t.Fatal(err)
	}
	env := sl.Push("events_api", opened)
	waitFor(t, "the Home", func() bool { h, _ := sl.HomeOf("U1"); return slices.Contains(h.Sections, "Autopilot: off") })
	waitFor(t, "the envelope acknowledged", func() bool { return sl.Acked(env) })
	press, err := sl.HomePress("U1", "home:set:digest:08:00")
	if err != nil {
		t.Fatal(err)
	}
	var payload map[string]any
	if err := json.Unmarshal([]byte(press.Get("payload")), &payload); err != nil {
		t.Fatal(err)
	}
	sl.Push("interactive", payload)
	waitFor(t, "the Home again", func() bool {
		h, _ := sl.HomeOf("U1")
		return h.Publishes == 2 && slices.Contains(h.Sections, "Morning digest: 08:00") && strings.Contains(h.Shown(), "Morning digest at 08:00.")
	})
}
