package slack_test

import (
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	goslack "github.com/slack-go/slack"

	"github.com/tidybot/tidybot/adapters/slack"
	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/bot"
)

func waitPane(t *testing.T, srv *slacktest.Server, ch, ts, what string, ok func(slacktest.Pane) bool) slacktest.Pane {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, _ := srv.AssistantThread(ch, ts)
		if ok(p) {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: pane %+v", what, p)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPaneThread: opening the pane sets the three suggested prompts; a
// message there reaches the bot as a DM in the pane's thread and titles
// the thread after it, once (a command names no thread); the thread shows a status line (HasStatus,
// SetStatus), as a channel thread does (TestChannelThreadStatus), and a
// DM thread no pane started is refused (invalid_thread_ts).
func TestPaneThread(t *testing.T) {
	a, srv := newAdapter(t)
	srv.Subscribe("message.im", "assistant_thread_started")
	rec := &recorder{}
	h := a.EventsHandler(rec)
	post := func(body []byte) {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, signed(t, "/slack/events", "application/json", body, secret, time.Now()))
		if w.Code != 200 {
			t.Fatalf("event: %d", w.Code)
		}
	}
	ts, started := srv.StartAssistantThread("U1", "C1")
	post(started)
	im := srv.IM("U1")
	p := waitPane(t, srv, im, ts, "the prompts", func(p slacktest.Pane) bool { return len(p.Prompts) == 3 })
	if len(p.Prompts) != len(slack.Prompts) || p.Prompts[0].Title != "Tidy my inbox" || p.Prompts[1].Message != "What's due today?" || p.Prompts[2].Title != "Plan my week" {
		t.Errorf("prompts %+v", p.Prompts)
	}
	for i, text := range []string{"/help", "What's due today? And please also look at everything that is overdue since last week", "thanks"} {
		post(srv.Events(slacktest.Message{Channel: im, ChannelType: "im", User: "U1", Text: text, TS: srv.NextTS(), ThreadTS: ts})[0])
		got := rec.got()
		if len(got) != i+1 || got[i].ThreadID != ts || !got[i].DM || got[i].Text != text && got[i].Command == "" {
			t.Fatalf("handed over %+v", got)
		}
	}
	p = waitPane(t, srv, im, ts, "the title", func(p slacktest.Pane) bool { return p.Title != "" })
	if p.Title != "What's due today? And please also look at everything that i…" {
		t.Errorf("title %q: want the first message, clipped", p.Title)
	}
	if !a.HasStatus(im, ts) || !a.HasStatus(im, "1.1") || !a.HasStatus("C1", "1.1") || a.HasStatus(im, "") || a.HasStatus("C1", "") {
		t.Errorf("HasStatus: pane %v, channel thread %v, DM without thread %v", a.HasStatus(im, ts), a.HasStatus("C1", "1.1"), a.HasStatus(im, ""))
	}
	if err := a.SetStatus(t.Context(), im, ts, "is working on it…"); err != nil {
		t.Fatal(err)
	}
	if p, _ := srv.AssistantThread(im, ts); p.Status != "is working on it…" {
		t.Errorf("status %q", p.Status)
	}
	if err := a.SetStatus(t.Context(), im, "1.1", "is working on it…"); err == nil {
		t.Error("a status in a thread no pane started was accepted")
	} else if se := (goslack.SlackErrorResponse{}); !errors.As(err, &se) || se.Err != "invalid_thread_ts" {
		t.Errorf("err %v, want invalid_thread_ts", err)
	}
	if a.HasStatus(im, "1.1") {
		t.Error("a thread Slack refused a status line still has one")
	}
}

// TestFakeAssistantMethodErrors: the fake Slack answers the assistant
// methods' documented errors, through slack-go.
func TestFakeAssistantMethodErrors(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	api := goslack.New(slacktest.Token, goslack.OptionAPIURL(srv.URL))
	ts, _ := srv.StartAssistantThread("U1", "C1")
	im := srv.IM("U1")
	five := goslack.AssistantThreadsSetSuggestedPromptsParameters{ChannelID: im, ThreadTS: ts}
	for range 5 {
		five.AddPrompt("p", "p")
	}
	for _, tt := range []struct {
		name string
		call func() error
		want string
	}{
		{"status without channel", func() error {
			return api.SetAssistantThreadsStatus(goslack.AssistantThreadsSetStatusParameters{ThreadTS: ts, Status: "x"})
		}, "channel_not_found"},
		{"status in an unknown thread", func() error {
			return api.SetAssistantThreadsStatus(goslack.AssistantThreadsSetStatusParameters{ChannelID: im, ThreadTS: "9.9", Status: "x"})
		}, "invalid_thread_ts"},
		{"five prompts", func() error { return api.SetAssistantThreadsSuggestedPrompts(five) }, "invalid_arguments"},
		{"empty title", func() error {
			return api.SetAssistantThreadsTitle(goslack.AssistantThreadsSetTitleParameters{ChannelID: im, ThreadTS: ts})
		}, "invalid_arguments"},
	} {
		err := tt.call()
		if se := (goslack.SlackErrorResponse{}); !errors.As(err, &se) || se.Err != tt.want {
			t.Errorf("%s: %v, want %s", tt.name, err, tt.want)
		}
	}
	srv.Grant("chat:write")
	err := api.SetAssistantThreadsTitle(goslack.AssistantThreadsSetTitleParameters{ChannelID: im, ThreadTS: ts, Title: "x"})
	if se := (goslack.SlackErrorResponse{}); !errors.As(err, &se) || se.Err != "missing_scope" {
		t.Errorf("title without assistant:write: %v", err)
	}
	if err := api.SetAssistantThreadsStatus(goslack.AssistantThreadsSetStatusParameters{ChannelID: im, ThreadTS: ts, Status: "is busy"}); err != nil {
		t.Errorf("status with chat:write: %v", err)
	}
}

// TestFakeFeedbackBlocks: the fake Slack keeps a message's feedback
// buttons and refuses what Slack refuses: feedback_buttons outside a
// context_actions block, more than 5 elements in one, a button without
// a value (invalid_blocks).
func TestFakeFeedbackBlocks(t *testing.T) {
	srv := slacktest.New()
	t.Cleanup(srv.Close)
	api := goslack.New(slacktest.Token, goslack.OptionAPIURL(srv.URL))
	btn := func(label, value string) *goslack.FeedbackButton {
		return goslack.NewFeedbackButton(goslack.NewTextBlockObject(goslack.PlainTextType, label, false, false), value)
	}
	fb := goslack.NewFeedbackButtonsBlockElement("feedback", btn("👍", "up"), btn("👎", "down"))
	text := goslack.NewSectionBlock(goslack.NewTextBlockObject(goslack.PlainTextType, "answer", false, false), nil, nil)
	if _, _, err := api.PostMessage("D1", goslack.MsgOptionText("answer", false), goslack.MsgOptionBlocks(text, goslack.NewContextActionsBlock("f", fb))); err != nil {
		t.Fatal(err)
	}
	if p := srv.Posts("D1")[0]; len(p.Feedback) != 2 || p.Feedback[0] != "up" || p.Feedback[1] != "down" || p.FeedbackAction != "feedback" {
		t.Errorf("posted %+v", p)
	}
	six := []goslack.BlockElement{fb, fb, fb, fb, fb, fb}
	for name, bs := range map[string][]goslack.Block{
		"in an actions block": {goslack.NewActionBlock("a", fb)},
		"six elements":        {goslack.NewContextActionsBlock("f", six...)},
		"no value":            {goslack.NewContextActionsBlock("f", goslack.NewFeedbackButtonsBlockElement("x", btn("👍", ""), btn("👎", "down")))},
	} {
		_, _, err := api.PostMessage("D1", goslack.MsgOptionText("answer", false), goslack.MsgOptionBlocks(bs...))
		if se := (goslack.SlackErrorResponse{}); !errors.As(err, &se) || se.Err != "invalid_blocks" {
			t.Errorf("%s: %v, want invalid_blocks", name, err)
		}
	}
}

// TestPaneStatusLapses: Slack removes a status set two minutes ago with
// no message since (the fake enforces it, here shortened); the adapter
// declares that lapse (bot.Lapsing), and setting the line again, as the
// bot does before it lapses, keeps it shown.
func TestPaneStatusLapses(t *testing.T) {
	a, srv := newAdapter(t)
	if a.Lapse() != 2*time.Minute || slacktest.StatusLapse != 2*time.Minute {
		t.Errorf("lapse %v, fake's %v: want Slack's two minutes", a.Lapse(), slacktest.StatusLapse)
	}
	const lapse = 200 * time.Millisecond
	srv.SetStatusLapse(lapse)
	ts, _ := srv.StartAssistantThread("U1", "C1")
	im := srv.IM("U1")
	if err := a.SetStatus(t.Context(), im, ts, "is working on it…"); err != nil {
		t.Fatal(err)
	}
	if p, _ := srv.AssistantThread(im, ts); p.Status != "is working on it…" {
		t.Fatalf("status %q right after it was set", p.Status)
	}
	for range 3 {
		time.Sleep(lapse / 2)
		if err := a.SetStatus(t.Context(), im, ts, "is working on it…"); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := srv.AssistantThread(im, ts); p.Status != "is working on it…" {
		t.Errorf("a status set again before it lapses is gone: %q", p.Status)
	}
	time.Sleep(lapse + lapse/2)
	if p, _ := srv.AssistantThread(im, ts); p.Status != "" {
		t.Errorf("status %q after the lapse: Slack removes it", p.Status)
	}
}

// TestChannelThreadStatus: setStatus works in channel threads (since
// 2026-03-05, scope chat:write): a channel thread shows the status line,
// cleared by the app's reply; a channel the bot is not in is refused
// (channel_not_found) and not asked again.
func TestChannelThreadStatus(t *testing.T) {
	a, srv := newAdapter(t)
	ctx := t.Context()
	if err := a.SetStatus(ctx, "C1", "1.000001", "is working on it…"); err != nil {
		t.Fatalf("a channel thread's status: %v", err)
	}
	if p, ok := srv.AssistantThread("C1", "1.000001"); !ok || p.Status != "is working on it…" {
		t.Fatalf("channel thread %+v (known %v): want the status shown", p, ok)
	}
	if _, err := a.Send(ctx, bot.Outgoing{ChatID: "C1", ThreadID: "1.000001", Text: "Done."}); err != nil {
		t.Fatal(err)
	}
	if p, _ := srv.AssistantThread("C1", "1.000001"); p.Status != "" {
		t.Errorf("status %q after the app replied: Slack clears it", p.Status)
	}
	srv.NotMember("C2")
	var se goslack.SlackErrorResponse
	if err := a.SetStatus(ctx, "C2", "1.000001", "is working on it…"); !errors.As(err, &se) || se.Err != "channel_not_found" {
		t.Errorf("a channel the bot is not in: %v", err)
	}
	if a.HasStatus("C2", "1.000001") {
		t.Error("a thread Slack refused a status line still has one")
	}
}
