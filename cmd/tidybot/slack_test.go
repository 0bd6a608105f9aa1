package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

const slackSecret = "slack-signing-secret"

// serveSlack runs `tidybot serve` with the fake Slack Web API and returns
// the fake and the base URL of tidybot's HTTP server.
func serveSlack(t *testing.T, e *env) (*slacktest.Server, string) {
	t.Helper()
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1"}
	base := serve(t, e)
	return sl, base
}

// serveSocketSlack runs `tidybot serve` with the fake Slack over Socket
// Mode (U1 allowed) and returns the fake once the connection is up.
func serveSocketSlack(t *testing.T, e *env) *slacktest.Server {
	t.Helper()
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackAppToken, e.cfg.SlackURL = slacktest.Token, slacktest.AppToken, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1"}
	serve(t, e)
	waitFor(t, "the Socket Mode connection", sl.Connected)
	return sl
}

func postSigned(t testing.TB, url, contentType string, body []byte, secret string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", ts)
	req.Header.Set("X-Slack-Signature", slacktest.Sign(secret, ts, body))
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("acknowledged after %v: Slack wants 3 s", d)
	}
	return resp.StatusCode
}

func lastPost(sl *slacktest.Server, channel string) slacktest.Posted {
	ps := sl.Posts(channel)
	if len(ps) == 0 {
		return slacktest.Posted{}
	}
	return ps[len(ps)-1]
}

func TestSlackChannelTidyAndButtonConfirmation(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	sl, base := serveSlack(t, e)

	// A forged request touches nothing.
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev0", "C1", "channel", "U1", "/tidy-inbox", "9.9", ""), "forged"); code != 401 {
		t.Errorf("forged event: %d, want 401", code)
	}
	// The tidy, asked in a channel by a mention: Slack sends it twice
	// (message.channels and app_mention, different event ids) and retries
	// the first; it runs once, and every post goes in its thread.
	mention := sl.Events(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " /tidy-inbox", TS: "1.1"})
	for _, ev := range append(mention, mention[0]) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastPost(sl, "C1").Text, "Moved ") })
	for _, p := range sl.Posts("C1") {
		if p.ThreadTS != "1.1" {
			t.Errorf("a post outside the run's thread: %+v", p)
		}
	}
	// The run's progress is the thread's status line (setStatus works in
	// channel threads), cleared at the end: no status message is posted.
	if p, _ := sl.AssistantThread("C1", "1.1"); !slices.Contains(p.Statuses, "is working on it…") || p.Status != "" {
		t.Errorf("channel thread status lines %q (now %q): want working, …, cleared", p.Statuses, p.Status)
	}
	for _, p := range sl.Posts("C1") {
		if strings.Contains(p.Text, "Working on it") {
			t.Errorf("a status message in a thread with a status line: %+v", p)
		}
	}

	// People talking in the channel start nothing and get no refusal; a
	// reply in the run's thread reaches the bot without a mention.
	for _, m := range []slacktest.Message{
		{Channel: "C1", ChannelType: "channel", User: "U1", Text: "I'll be late today", TS: "1.5"},
		{Channel: "C1", ChannelType: "channel", User: "U666", Text: "lunch anyone?", TS: "1.6"},
		{Channel: "C1", ChannelType: "channel", User: "U1", Text: "thanks, all sorted", TS: "1.7", ThreadTS: "1.1"},
	} {
		for _, ev := range sl.Events(m) {
			if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
				t.Fatalf("event: %d", code)
			}
		}
	}
	waitFor(t, "the answer in the thread", func() bool { return lastPost(sl, "C1").Text == "You said: thanks, all sorted" })

	// A gated delete through a DM and a button press.
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev2", "D1", "im", "U1", "delete the cake task", "2.1", ""), slackSecret); code != 200 {
		t.Fatalf("dm: %d", code)
	}
	waitFor(t, "the confirmation", func() bool { return len(lastPost(sl, "D1").Buttons) == 2 })
	q := lastPost(sl, "D1")
	if q.Labels[0] != "Delete 1 task" || q.ThreadTS != "" {
		t.Errorf("question %+v", q)
	}
	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "trigger_id": "tr1", "user": map[string]any{"id": "U1"}, "channel": map[string]any{"id": "D1"},
		"container": map[string]any{"type": "message", "message_ts": q.TS, "channel_id": "D1"},
		"actions":   []map[string]any{{"type": "button", "action_id": "choice_0", "block_id": "choices", "value": q.Buttons[0]}}})
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(url.Values{"payload": {string(payload)}}.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	waitFor(t, "the deletion", func() bool { return lastPost(sl, "D1").Text == "Deleted the cake task." })
	if n := len(e.todo.Tasks()); n != 9 {
		t.Errorf("tasks = %d, want 9", n)
	}
	for _, p := range sl.Posts("D1") {
		if p.TS == q.TS && (len(p.Buttons) != 0 || !strings.Contains(p.Text, "→ yes")) {
			t.Errorf("the buttons did not give way to the choice: %+v", p)
		}
	}

	if n := strings.Count(fmtPosts(sl.Posts("C1")), "Moved 9 tasks: "); n != 1 {
		t.Errorf("one mention ran %d times", n)
	}
	for _, p := range sl.Posts("C1") {
		if p.ThreadTS != "1.1" || strings.Contains(p.Text, "late today") || strings.Contains(p.Text, "lunch") || strings.Contains(p.Text, "U666") {
			t.Errorf("the bot answered chatter in the channel: %+v", p)
		}
	}

	// Someone not allowed gets one refusal.
	_ = postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent("Ev3", "D9", "im", "U666", "hi", "3.1", ""), slackSecret)
	waitFor(t, "the refusal", func() bool { return strings.Contains(lastPost(sl, "D9").Text, "slack:U666") })
}

func fmtPosts(ps []slacktest.Posted) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text + "\n")
	}
	return b.String()
}

func TestSlackSocketMode(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	sl := serveSocketSlack(t, e)
	var ev map[string]any
	_ = json.Unmarshal(slacktest.MessageEvent("Ev1", "D1", "im", "U1", "/tidy-inbox", "1.1", ""), &ev)
	id := sl.Push("events_api", ev)
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastPost(sl, "D1").Text, "Moved ") })
	if !sl.Acked(id) {
		t.Error("the envelope was not acknowledged")
	}
}

func TestSlackSlashCommandWhereTheBotIsNotAMember(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	sl, base := serveSlack(t, e)
	sl.NotMember("G9") // a private channel the bot was never added to
	form := sl.SlashCommand("G9", "U1", "/tidy-inbox", "")
	if code := postSigned(t, base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("command: %d", code)
	}
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastPost(sl, "G9").Shown(), "Moved ") })
	ps := sl.Posts("G9")
	if len(ps) < 2 || !strings.Contains(ps[0].Shown(), "Working on it") {
		t.Errorf("posts %+v: want the status message, then the answer", ps)
	}
	for _, p := range ps {
		if !p.ResponseURL || !p.Ephemeral {
			t.Errorf("post %+v: want it through the command's response_url, to the user", p)
		}
	}
	// /tidy undo, the registered command, reverts it there too.
	form = sl.SlashCommand("G9", "U1", "/tidy", "undo")
	if code := postSigned(t, base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("command: %d", code)
	}
	waitFor(t, "the undo", func() bool { return len(e.layout()["Inbox"]) == 9 })
}

func TestSlackTokenEchoedBySlackIsNeverLogged(t *testing.T) {
	e := newEnv(t)
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	sl.EchoTokens() // Slack's error answers repeat the token
	sl.NotMember("C5")
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers, e.cfg.LogLevel = []string{"slack:U1"}, "debug"
	r := startServe(t, e, nil)
	for _, ev := range sl.Events(slacktest.Message{Channel: "C5", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " what's due today?", TS: "1.1"}) {
		if code := postSigned(t, r.base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the failed post in the log", func() bool { return strings.Contains(r.logs.String(), "not_in_channel") })
	r.stop()
	if logs := r.logs.String(); strings.Contains(logs, slacktest.Token) || strings.Contains(logs, slackSecret) {
		t.Errorf("a secret in the log:\n%s", logs)
	}
}

// TestSlackDMBetweenTwoPeopleIsShared: a slash command typed in a DM
// between two people (a D… channel too, where the bot is no member) is
// not the bot's DM: each person has their own conversation there, so the
// second person's /tidy undo does not revert the first person's run. The
// bot's own IM with a person (conversations.open) is one conversation.
func TestSlackDMBetweenTwoPeopleIsShared(t *testing.T) {
	e := newEnv(t)
	e.todo.SeedTalkInbox()
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1", "slack:U2"}
	base := serve(t, e)
	const between = "D9" // U1 and U2's own DM
	sl.NotMember(between)
	command := func(channel, user, cmd, text string) {
		t.Helper()
		form := sl.SlashCommand(channel, user, cmd, text)
		if code := postSigned(t, base+"/slack/commands", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
			t.Fatalf("command: %d", code)
		}
	}
	command(between, "U1", "/tidy-inbox", "")
	waitFor(t, "the tidy's answer", func() bool { return strings.HasPrefix(lastPost(sl, between).Shown(), "Moved ") })
	command(between, "U2", "/tidy", "undo")
	waitFor(t, "U2's undo answered", func() bool { return !strings.HasPrefix(lastPost(sl, between).Shown(), "Moved ") })
	if got := lastPost(sl, between).Shown(); got != "There is nothing to undo here." {
		t.Errorf("U2's /tidy undo = %q, want nothing to undo", got)
	}
	if n := len(e.layout()["Inbox"]); n != 0 {
		t.Errorf("inbox after U2's undo: %d tasks: U1's run was reverted", n)
	}
	// U1's own undo there reverts it.
	command(between, "U1", "/tidy", "undo")
	waitFor(t, "U1's undo", func() bool { return len(e.layout()["Inbox"]) == 9 })

	// In the bot's own IM with U1, a slash command and a message are one
	// conversation: /tidy undo reverts what a message there did.
	im := sl.IM("U1")
	for _, ev := range sl.Events(slacktest.Message{Channel: im, ChannelType: "im", User: "U1", Text: "/tidy-inbox", TS: sl.NextTS()}) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the tidy's answer in the IM", func() bool { return strings.HasPrefix(lastPost(sl, im).Text, "Moved ") })
	command(im, "U1", "/tidy", "undo")
	waitFor(t, "the undo in the IM", func() bool { return len(e.layout()["Inbox"]) == 9 })
	command(im, "U1", "/tidy", "usage")
	// /usage answers at once, the queued undo once its job ran: the
	// undo's answer may come after it, so the usage is looked for among
	// every post, not only the last (CI under load saw that order).
	waitFor(t, "the usage", func() bool {
		for _, p := range sl.Posts(im) {
			if strings.Contains(p.Text, "This conversation used") {
				return true
			}
		}
		return false
	})
	if n := sl.Opens(); n != 2 {
		t.Errorf("conversations.open called %d times, want twice: once per person, then kept", n)
	}
}
