package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
)

// The Slack assistant pane through `tidybot serve`: opening it sets the
// suggested prompts; a message there titles the thread, shows the status
// line at once and through the run, clears it, and the answer is posted
// in the pane's thread with no status message beside it. A DM outside
// the pane gets 👀 on the message instead (issue 36).
func TestSlackPaneStatusAndAnswer(t *testing.T) {
	e := newEnv(t)
	sl, base := serveSlack(t, e)
	sl.Subscribe("message.im", "app_mention", "assistant_thread_started", "assistant_thread_context_changed")
	ts, started := sl.StartAssistantThread("U1", "C1")
	if code := postSigned(t, base+"/slack/events", "application/json", started, slackSecret); code != 200 {
		t.Fatalf("assistant_thread_started: %d", code)
	}
	im := sl.IM("U1")
	waitFor(t, "the suggested prompts", func() bool { p, _ := sl.AssistantThread(im, ts); return len(p.Prompts) == 3 })
	if code := postSigned(t, base+"/slack/events", "application/json", sl.ChangeAssistantContext(im, ts, "C2"), slackSecret); code != 200 {
		t.Fatalf("assistant_thread_context_changed: %d", code)
	}
	ev := sl.Events(slacktest.Message{Channel: im, ChannelType: "im", User: "U1", Text: "hello", TS: sl.NextTS(), ThreadTS: ts})
	if code := postSigned(t, base+"/slack/events", "application/json", ev[0], slackSecret); code != 200 {
		t.Fatalf("message: %d", code)
	}
	waitFor(t, "the answer in the pane", func() bool { return lastPost(sl, im).Text == "You said: hello" })
	p, _ := sl.AssistantThread(im, ts)
	if len(p.Statuses) < 3 || p.Statuses[0] != "is reading your message…" || !slices.Contains(p.Statuses, "is working on it…") || p.Statuses[len(p.Statuses)-1] != "" {
		t.Errorf("statuses %q: want reading, working, …, cleared", p.Statuses)
	}
	if p.Title != "hello" || p.Status != "" {
		t.Errorf("pane %+v: want titled hello, no status left", p)
	}
	for _, m := range sl.Posts(im) {
		if m.ThreadTS != ts || strings.Contains(m.Text, "Working on it") {
			t.Errorf("post %+v: want only the answer, in the pane's thread", m)
		}
	}
	// A DM outside the pane: 👀 on the message (reactions.add), and the
	// answer with no status message (the run answered at once).
	before := len(sl.Posts(im))
	againTS := sl.NextTS()
	out := sl.Events(slacktest.Message{Channel: im, ChannelType: "im", User: "U1", Text: "again", TS: againTS})
	if code := postSigned(t, base+"/slack/events", "application/json", out[0], slackSecret); code != 200 {
		t.Fatalf("message: %d", code)
	}
	waitFor(t, "the DM's answer", func() bool { return lastPost(sl, im).Text == "You said: again" })
	if n := len(sl.Posts(im)) - before; n != 1 {
		t.Errorf("%d posts outside the pane, want the answer alone: %s", n, fmtPosts(sl.Posts(im)))
	}
	if r := sl.Reactions(im); len(r) != 1 || r[0].TS != againTS || r[0].Name != "eyes" {
		t.Errorf("reactions %+v, want 👀 on the DM's message alone (the pane's message had its status line)", r)
	}
}

// TestSlackPaneStreamsTheAnswer: a run in the assistant pane shows the
// native status line, the answer streamed into the pane's thread, and
// the answer ends with Undo and Slack's feedback buttons.
func TestSlackPaneStreamsTheAnswer(t *testing.T) {
	e := newEnv(t)
	streamingModel(t, e)
	sl, base := serveSlack(t, e)
	sl.Subscribe("message.im", "app_mention", "assistant_thread_started", "assistant_thread_context_changed")
	ts, started := sl.StartAssistantThread("U1", "C1")
	if code := postSigned(t, base+"/slack/events", "application/json", started, slackSecret); code != 200 {
		t.Fatalf("assistant_thread_started: %d", code)
	}
	im := sl.IM("U1")
	ev := sl.Events(slacktest.Message{Channel: im, ChannelType: "im", User: "U1", Text: "add buy milk", TS: sl.NextTS(), ThreadTS: ts})
	if code := postSigned(t, base+"/slack/events", "application/json", ev[0], slackSecret); code != 200 {
		t.Fatalf("message: %d", code)
	}
	defer func() { t.Logf("streams %+v", sl.Streams(im)); t.Logf("posts %s", fmtPosts(sl.Posts(im))) }()
	waitFor(t, "the streamed answer in the pane", func() bool {
		ss := sl.Streams(im)
		return len(ss) == 1 && !ss[0].Open && len(answers(sl, im)) == 1 && len(answers(sl, im)[0].Feedback) == 2
	})
	s, a := sl.Streams(im)[0], answers(sl, im)[0]
	if a.TS != s.TS || a.ThreadTS != ts || a.Text != streamAnswer {
		t.Errorf("the answer %+v is not the stream %+v in the pane's thread %s", a, s, ts)
	}
	if !strings.Contains(strings.Join(a.Labels, ","), "Undo") {
		t.Errorf("labels %q, want Undo", a.Labels)
	}
	p, _ := sl.AssistantThread(im, ts)
	if len(p.Statuses) < 2 || p.Statuses[0] != "is reading your message…" || p.Status != "" {
		t.Errorf("statuses %q (now %q): want the status line shown, then cleared", p.Statuses, p.Status)
	}
	for _, m := range sl.Posts(im) {
		if m.ThreadTS != ts {
			t.Errorf("post %+v outside the pane's thread", m)
		}
	}
}
