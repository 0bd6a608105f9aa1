package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
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
	home := publishedHome(t, sl, "U1", 1)
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
	home = publishedHome(t, sl, "U1", 2)
	if !slices.Contains(home.Sections, "Autopilot: on (project, section, labels, due date)") ||
		!strings.Contains(home.Shown(), "Autopilot is on") || !slices.Contains(home.Buttons, "home:set:autopilot:off") {
		t.Errorf("the Home after autopilot on: %+v", home)
	}
	// Confirmations, from the Home.
	press, err = sl.HomePress("U1", "home:set:confirm:writes")
	if err != nil {
		t.Fatal(err)
	}
	_ = postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(press.Encode()), slackSecret)
	home = publishedHome(t, sl, "U1", 3)
	if !slices.Contains(home.Sections, "Confirm: writes (before every change)") {
		t.Errorf("the Home after confirm writes: %+v", home)
	}
	// The same press again (Slack's retry) changes nothing more: opening
	// the Home, queued after it on the person's lane, is the 4th publish.
	_ = postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(press.Encode()), slackSecret)
	if code := postSigned(t, base+"/slack/events", "application/json", sl.AppHomeOpened("U1"), slackSecret); code != 200 {
		t.Fatalf("app_home_opened: %d", code)
	}
	publishedHome(t, sl, "U1", 4)

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
	home := publishedHome(t, sl, "U666", 1)
	if !strings.Contains(home.Shown(), "slack:U666") || strings.Contains(home.Shown(), "Autopilot") || len(home.Buttons) != 0 {
		t.Errorf("the Home of someone not allowed: %+v", home)
	}
}

// TestSlackHomeOverSocketMode: the same over Socket Mode: the opened
// Home is published and its envelope acknowledged; a press there
// changes the setting and publishes the Home again.
func TestSlackHomeOverSocketMode(t *testing.T) {
	e := newEnv(t)
	sl := serveSocketSlack(t, e)
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

// TestSlackHomeUndoesAnAutopilotFiling: through serve against the fake
// Slack, Todoist and model, an autopilot run files a task; the person's
// Home shows that filing with an Undo; a press of it from another
// person's Home view undoes nothing (the run is not theirs) and tells
// them so on their own Home; the owner's press goes through the chat's
// undo (the report is posted in their DM), puts the task back in the
// fake Todoist's inbox, and the Home is published again without the
// filing, saying what was undone.
func TestSlackHomeUndoesAnAutopilotFiling(t *testing.T) {
	e := newEnv(t)
	groceries := e.todo.AddProject(todoisttest.Project{Name: "Groceries"})
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1", "slack:U2"}
	e.cfg.AutopilotInterval = time.Minute
	clk := &testClock{now: time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)}
	b, _ := serveClocked(t, e, clk)
	base := "http://" + e.cfg.HTTPAddr
	press := func(presser, owner, value string) {
		t.Helper()
		form, err := sl.HomePressAs(presser, owner, value)
		if err != nil {
			t.Fatal(err)
		}
		if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
			t.Fatalf("press: %d", code)
		}
	}
	open := func(user string) {
		t.Helper()
		if code := postSigned(t, base+"/slack/events", "application/json", sl.AppHomeOpened(user), slackSecret); code != 200 {
			t.Fatalf("app_home_opened: %d", code)
		}
	}

	dm := sl.IM("U1")
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev1", dm, "im", "U1", "/settings autopilot on", "1.1", ""), slackSecret); code != 200 {
		t.Fatal(code)
	}
	waitFor(t, "autopilot on", func() bool { return strings.Contains(lastPost(sl, dm).Text, "Autopilot is on") })
	clk.Set(clk.Now().Add(time.Minute))
	runTimers(t, b) // the first look
	milk := e.todo.AddTask(todoisttest.Task{Content: "Buy milk"})
	clk.Set(clk.Now().Add(time.Minute))
	runTimers(t, b)
	waitFor(t, "milk filed", func() bool { got, _ := e.todo.Task(milk.ID); return got.ProjectID == groceries.ID })
	waitFor(t, "autopilot's message", func() bool { return strings.HasPrefix(lastPost(sl, dm).Text, "🤖 Filed 1 new task") })

	open("U1")
	home := publishedHome(t, sl, "U1", 1)
	var undo string
	for _, v := range home.Buttons {
		if strings.HasPrefix(v, "home:u:") {
			undo = v
		}
	}
	if undo == "" || !strings.Contains(home.Shown(), "“Buy milk” → Groceries") || !strings.Contains(home.Shown(), "Autopilot's last filings") {
		t.Fatalf("the Home shows no filing with an Undo:\n%s\n%q", home.Shown(), home.Buttons)
	}

	// U2 presses U1's Undo from their own Home view: nothing is undone.
	open("U2")
	press("U2", "U1", undo)
	waitFor(t, "U2's Home says why", func() bool {
		h, _ := sl.HomeOf("U2")
		return strings.Contains(h.Shown(), "Only the person who asked can undo this.")
	})
	if err := b.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.todo.Task(milk.ID); got.ProjectID != groceries.ID {
		t.Fatalf("another person's press undid the filing: milk in %s", got.ProjectID)
	}
	if h, _ := sl.HomeOf("U1"); h.Publishes != home.Publishes || !slices.Contains(h.Buttons, undo) {
		t.Errorf("U1's Home changed on U2's press: %+v", h)
	}

	// U1 presses it: the filing is undone as /undo does.
	form, err := sl.HomePress("U1", undo)
	if err != nil {
		t.Fatal(err)
	}
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	waitFor(t, "milk back in the inbox", func() bool { got, _ := e.todo.Task(milk.ID); return got.ProjectID == e.todo.InboxID() })
	waitFor(t, "the Home again, without the filing", func() bool {
		h, _ := sl.HomeOf("U1")
		return strings.Contains(h.Shown(), "↩️ Undid 1 of 1 changes") && !slices.Contains(h.Buttons, undo) && !strings.Contains(h.Shown(), "Autopilot's last filings")
	})
	waitFor(t, "the undo's report in the DM", func() bool { return strings.HasPrefix(lastPost(sl, dm).Text, "↩️ Undid 1 of 1 changes") })

	// The same press again (Slack's retry) does nothing more.
	if err := b.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	before, _ := sl.HomeOf("U1")
	posts := len(sl.Posts(dm))
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("press again: %d", code)
	}
	if err := b.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h, _ := sl.HomeOf("U1"); h.Publishes != before.Publishes || len(sl.Posts(dm)) != posts {
		t.Errorf("a retried press acted again: %d publishes (was %d), %d posts (was %d)", h.Publishes, before.Publishes, len(sl.Posts(dm)), posts)
	}
}

// TestSlackHomeConnectDisconnectAndModel: through serve in team mode
// against the fake Slack and Todoist, the Home's account controls work:
// Connect Todoist posts the Connect link in the person's DM (the link of
// /connect), which connects their account; the Home then shows it
// connected, and Disconnect Todoist revokes the token as /disconnect
// does. The model tier's button sets the tier /settings model sets.
func TestSlackHomeConnectDisconnectAndModel(t *testing.T) {
	e := newEnv(t)
	svc, base := teamTodoist(t, e, 7)
	alice := svc.NewAccount()
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1"}
	e.cfg.Models = "fast:scripted-mini,best:scripted-large"
	serveTeam(t, e, io.Discard)
	press := func(value string) {
		t.Helper()
		form, err := sl.HomePress("U1", value)
		if err != nil {
			t.Fatal(err)
		}
		if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
			t.Fatalf("press %s: %d", value, code)
		}
	}
	if code := postSigned(t, base+"/slack/events", "application/json", sl.AppHomeOpened("U1"), slackSecret); code != 200 {
		t.Fatalf("app_home_opened: %d", code)
	}
	home := publishedHome(t, sl, "U1", 1)
	if !strings.Contains(home.Shown(), "No Todoist is connected") || !slices.Contains(home.Buttons, "home:connect") {
		t.Fatalf("the Home before connecting: %s %q", home.Shown(), home.Buttons)
	}

	press("home:connect")
	dm := sl.IM("U1")
	waitFor(t, "the Connect link in the DM", func() bool { return connectLink(lastPost(sl, dm).Text) != "" })
	if code, body := open(t, alice.Browser(), connectLink(lastPost(sl, dm).Text)); code != http.StatusOK || !strings.Contains(body, "Connected") {
		t.Fatalf("connect: HTTP %d %q", code, body)
	}
	if h := publishedHome(t, sl, "U1", 2); !strings.Contains(h.Shown(), "I sent you a Connect link") {
		t.Errorf("the Home after Connect: %s", h.Shown())
	}
	if code := postSigned(t, base+"/slack/events", "application/json", sl.AppHomeOpened("U1"), slackSecret); code != 200 {
		t.Fatalf("app_home_opened: %d", code)
	}
	home = publishedHome(t, sl, "U1", 3)
	if !strings.Contains(home.Shown(), "Your Todoist is connected.") || !slices.Contains(home.Buttons, "home:disconnect") || len(alice.Tokens()) != 1 {
		t.Fatalf("the Home once connected: %s %q; %d tokens", home.Shown(), home.Buttons, len(alice.Tokens()))
	}

	press("home:set:model:best")
	waitFor(t, "the tier set", func() bool {
		h, _ := sl.HomeOf("U1")
		return slices.Contains(h.Sections, "Model: best (scripted-large)")
	})

	press("home:disconnect")
	waitFor(t, "disconnected", func() bool {
		h, _ := sl.HomeOf("U1")
		return strings.Contains(h.Shown(), "Disconnected: I revoked my access") && slices.Contains(h.Buttons, "home:connect")
	})
	if n := len(alice.Tokens()); n != 0 {
		t.Errorf("%d tokens in force after Disconnect on the Home", n)
	}
}

// publishedHome waits until user's Home was published n times (the
// bot publishes it after answering Slack) and returns it; a Home
// published more often fails the test.
func publishedHome(t *testing.T, sl *slacktest.Server, user string, n int) slacktest.Home {
	t.Helper()
	waitFor(t, fmt.Sprintf("Home publish %d of %s", n, user), func() bool { h, _ := sl.HomeOf(user); return h.Publishes >= n })
	h, _ := sl.HomeOf(user)
	if h.Publishes != n {
		t.Fatalf("the Home of %s published %d times, want %d: %s", user, h.Publishes, n, h.Shown())
	}
	return h
}

// TestSlackHomeAckedBeforeViewsPublish: with views.publish held (a slow
// Slack), a press on the Home and opening it are answered 200 at once,
// Slack's 3-second ack not waiting for the Home's build and publish;
// once views.publish answers, both Homes are published, in order.
func TestSlackHomeAckedBeforeViewsPublish(t *testing.T) {
	e := newEnv(t)
	sl, base := serveSlack(t, e)
	if code := postSigned(t, base+"/slack/events", "application/json", sl.AppHomeOpened("U1"), slackSecret); code != 200 {
		t.Fatalf("app_home_opened: %d", code)
	}
	publishedHome(t, sl, "U1", 1) // the view a press comes from
	press, err := sl.HomePress("U1", "home:set:confirm:writes")
	if err != nil {
		t.Fatal(err)
	}
	release := sl.Hold(t, "views.publish")
	acked := func(what, path, contentType string, body []byte) {
		t.Helper()
		code := make(chan int, 1)
		go func() { code <- postSigned(t, base+path, contentType, body, slackSecret) }()
		select {
		case c := <-code:
			if c != 200 {
				t.Fatalf("%s: %d", what, c)
			}
		case <-time.After(10 * time.Second): // a deadlock, not a speed: views.publish is held until released
			release()
			t.Fatalf("%s was answered only once views.publish was", what)
		}
	}
	acked("the press", "/slack/interactivity", "application/x-www-form-urlencoded", []byte(press.Encode()))
	acked("app_home_opened", "/slack/events", "application/json", sl.AppHomeOpened("U1"))
	if h, _ := sl.HomeOf("U1"); h.Publishes != 1 {
		t.Fatalf("a Home published while views.publish was held: %+v", h)
	}
	release()
	if h := publishedHome(t, sl, "U1", 3); !slices.Contains(h.Sections, "Confirm: writes (before every change)") {
		t.Errorf("the Home after the press: %s", h.Shown())
	}
}
