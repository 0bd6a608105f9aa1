package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// streamAnswer is a final answer long enough to stream over a few
// seconds' worth of updates at streamRate.
var streamAnswer = "I added \"Buy milk\" to your inbox. " + strings.Repeat("Everything else stays where it was. ", 8) + "Tell me if you want it due today."

const streamRate = 40 // tokens a second: the answer streams over about 2.3 s

// streamingModel makes e's model add a task, then answer streamAnswer,
// streamed at streamRate, in the json protocol: its reply is one action,
// so a final answer there carries no write and is shown as it is written
// (a tools reply's final_answer is shown only once the reply is whole,
// agent/stream.go). first, when set, is the reply of the first answer
// attempt (a broken stream).
func streamingModel(t *testing.T, e *env, first ...openaitest.Reply) {
	t.Helper()
	e.cfg.Protocol = "json"
	replies := append([]openaitest.Reply{jsonAction(t, map[string]any{"type": "add_tasks", "tasks": []map[string]string{{"content": "Buy milk"}}})}, first...)
	e.model = openaitest.New(openaitest.Replies(append(replies, jsonAnswer(t, streamAnswer))...), openaitest.WithTokenRate(streamRate))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
}

// jsonAction is a json protocol reply making action.
func jsonAction(t testing.TB, action map[string]any) openaitest.Reply {
	t.Helper()
	b, err := json.Marshal(map[string]any{"thought": "", "action": action})
	if err != nil {
		t.Fatal(err)
	}
	return openaitest.Text(string(b))
}

// jsonAnswer is a json protocol reply answering answer.
func jsonAnswer(t testing.TB, answer string) openaitest.Reply {
	t.Helper()
	return jsonAction(t, map[string]any{"type": "final_answer", "answer": answer})
}

func mustMarshal(t *testing.T, v map[string]string) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answers counts the posts of channel that show the answer.
func answers(sl *slacktest.Server, channel string) []slacktest.Posted {
	var out []slacktest.Posted
	for _, p := range sl.Posts(channel) {
		if strings.Contains(p.Text, "Tell me if you want it due today.") {
			out = append(out, p)
		}
	}
	return out
}

// TestSlackDMAnswerIsNotStreamed: Slack streams only replies in a
// thread, so a top-level DM's answer is posted as a message, with no
// stream tried and no preview recorded.
func TestSlackDMAnswerIsNotStreamed(t *testing.T) {
	e := newEnv(t)
	streamingModel(t, e)
	sl, base := serveSlack(t, e)
	slackDM(t, base, "Ev0", "D1", "U1", "add buy milk", "1.000000")
	waitFor(t, "the answer", func() bool {
		return len(answers(sl, "D1")) == 1 && len(answers(sl, "D1")[0].Buttons) > 0
	})
	if n := sl.Calls("chat.startStream"); n != 0 || len(sl.Streams("D1")) != 0 {
		t.Errorf("%d chat.startStream calls for a top-level DM answer, want none", n)
	}
}

// TestSlackDMStreamsTheAnswer: a request in a DM thread shows its answer
// streamed into one message (started, appended, stopped) which ends with
// the Undo button and is the answer: posted once, nothing posted after
// it.
func TestSlackDMStreamsTheAnswer(t *testing.T) {
	e := newEnv(t)
	streamingModel(t, e)
	sl, base := serveSlack(t, e)
	slackDMThread(t, base, "Ev1", "D1", "U1", "add buy milk", "1.000002", "1.000001")
	waitFor(t, "the streamed answer", func() bool {
		ss := sl.Streams("D1")
		return len(ss) == 1 && !ss[0].Open && len(answers(sl, "D1")) == 1 && len(answers(sl, "D1")[0].Buttons) > 0
	})
	s := sl.Streams("D1")[0]
	a := answers(sl, "D1")[0]
	if a.TS != s.TS || a.Text != streamAnswer || a.Metadata == nil {
		t.Errorf("the answer %+v is not the stream %+v", a, s)
	}
	if s.Appends < 1 {
		t.Errorf("the stream was appended %d times; chunks %q", s.Appends, s.Chunks)
	}
	if !strings.HasPrefix(a.Buttons[0], "undo") && !strings.Contains(strings.Join(a.Labels, ","), "Undo") {
		t.Errorf("buttons %q %q, want Undo", a.Buttons, a.Labels)
	}
	if n := sl.Calls("chat.postMessage"); n != 1 {
		t.Errorf("%d chat.postMessage calls, want 1 (the status message)", n)
	}
}

// slackDMThread sends a DM to the bot in the thread of message thread.
func slackDMThread(t *testing.T, base, ev, channel, user, text, ts, thread string) {
	t.Helper()
	if code := postSigned(t, base+"/slack/events", "application/json", slacktest.MessageEvent(ev, channel, "im", user, text, ts, thread), slackSecret); code != 200 {
		t.Fatalf("event %s: HTTP %d", ev, code)
	}
}

// TestSlackStreamRefusedFallsBack: a workspace without streams, and a
// stream whose stop fails, both end with the answer posted once as a
// message with its Undo button.
func TestSlackStreamRefusedFallsBack(t *testing.T) {
	for _, tt := range []struct {
		name string
		fail func(*slacktest.Server)
	}{
		{"no streams", func(sl *slacktest.Server) { sl.RefuseStreams("unknown_method") }},
		{"stop fails", func(sl *slacktest.Server) { sl.FailNext("chat.stopStream", "internal_error") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			streamingModel(t, e)
			sl, base := serveSlack(t, e)
			tt.fail(sl)
			slackDMThread(t, base, "Ev1", "D1", "U1", "add buy milk", "1.000002", "1.000001")
			waitFor(t, "the answer", func() bool {
				for _, p := range answers(sl, "D1") {
					if len(p.Buttons) > 0 && p.Metadata != nil {
						return true
					}
				}
				return false
			})
			// The status message, posted at the start (the thread's line
			// refused) or with the first note (the message had its 👀),
			// is not left saying it is working.
			if st := sl.Posts("D1")[0]; st.Updates == 0 && strings.Contains(st.Text, "Working on it") {
				t.Errorf("the status message was not edited: %+v", st)
			}
			var whole int
			for _, p := range answers(sl, "D1") {
				if p.Shown() == streamAnswer || p.Text == streamAnswer {
					whole++
				}
			}
			if whole != 1 {
				t.Errorf("the whole answer was posted %d times, want 1: %s", whole, fmtPosts(sl.Posts("D1")))
			}
		})
	}
}

// TestTelegramPrivateChatDrafts: a private chat sees the answer as
// growing drafts, then as the message (with Undo); a group sees no
// draft, and gets the answer as before.
func TestTelegramPrivateChatDrafts(t *testing.T) {
	e := newEnv(t)
	e.cfg.AllowedUsers = []string{"telegram:42"}
	streamingModel(t, e)
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "add buy milk")
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) == streamAnswer })
	ds := tg.Drafts(42)
	if len(ds) < 2 {
		t.Fatalf("drafts %+v, want the answer growing", ds)
	}
	for i, d := range ds {
		if !strings.HasPrefix(streamAnswer, d.Text) || d.DraftID != ds[0].DraftID || (i > 0 && len(d.Text) <= len(ds[i-1].Text)) {
			t.Errorf("draft %d %q does not grow the answer under one id", i, d.Text)
		}
	}
	ms := tg.Messages(42)
	if last := ms[len(ms)-1]; len(last.Buttons) == 0 {
		t.Errorf("the answer has no Undo button: %+v", last)
	}
}

func TestTelegramGroupGetsNoDrafts(t *testing.T) {
	e := newEnv(t)
	e.cfg.AllowedUsers = []string{"telegram:42"}
	streamingModel(t, e)
	tg := serveTelegram(t, e)
	tg.PrivacyOff()
	const group = -100
	tg.PushText(group, 42, "@"+telegramtest.BotUserName+" add buy milk")
	waitFor(t, "the answer", func() bool { return lastText(tg, group) == streamAnswer })
	if ds := tg.Drafts(group); len(ds) != 0 {
		t.Errorf("a group got drafts: %+v", ds)
	}
}

// TestStreamBrokenByTheModel: the model's stream breaks in the middle of
// the answer; the call is made again, the drafts catch up and go on, and
// the answer arrives whole, once.
func TestStreamBrokenByTheModel(t *testing.T) {
	e := newEnv(t)
	e.cfg.AllowedUsers = []string{"telegram:42"}
	broken := jsonAnswer(t, streamAnswer).FailAfter(120)
	streamingModel(t, e, broken)
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "add buy milk")
	waitFor(t, "the answer", func() bool { return lastText(tg, 42) == streamAnswer })
	n := 0
	for _, m := range tg.Messages(42) {
		if m.Text == streamAnswer {
			n++
		}
	}
	if n != 1 || e.model.Calls() != 3 {
		t.Errorf("the answer was sent %d times after %d model calls; want once after 3", n, e.model.Calls())
	}
	for _, d := range tg.Drafts(42) {
		if !strings.HasPrefix(streamAnswer, d.Text) {
			t.Errorf("draft %q is not a beginning of the answer", d.Text)
		}
	}
}

// TestStreamKilledMidStreamAnswersOnce: `tidybot serve` is SIGKILLed
// while it streams an answer into a Slack DM thread (the stream open, appended
// to) and restarted on the same database: the resumed run's answer is
// the one message of the DM that shows it, whole, with its Undo button;
// the half answer the dead process left is deleted (chat.delete), not
// left beside it.
func TestStreamKilledMidStreamAnswersOnce(t *testing.T) {
	e := newEnv(t)
	streamingModel(t, e, jsonAnswer(t, streamAnswer)) // the killed run's answer, then the resumed run's
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	addr := freeAddr(t)
	base := "http://" + addr
	environ := append(os.Environ(),
		"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+e.model.URL,
		"TODOIST_TOKEN="+e.todo.Token, "TODOIST_API_URL="+e.todo.URL, "TIDYBOT_DB="+e.cfg.DB,
		"TIDYBOT_HTTP_ADDR="+addr, "TIDYBOT_METRICS_ADDR=", "TIDYBOT_LOG_LEVEL=warn",
		"SLACK_BOT_TOKEN="+slacktest.Token, "SLACK_SIGNING_SECRET="+slackSecret, "SLACK_API_URL="+sl.URL,
		"TIDYBOT_ALLOWED_USERS=slack:U1", "TIDYBOT_PROTOCOL=json")
	bin := tidybotBinary(t)
	var logs syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", logs.String())
		}
	})
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command(bin, "serve")
		cmd.Env = environ
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitServing(t, base, make(chan error, 1), &syncBuffer{})
		return cmd
	}
	proc := start()
	slackDMThread(t, base, "Ev1", "D1", "U1", "add buy milk", "1.000002", "1.000001")
	waitFor(t, "the answer streaming", func() bool {
		ss := sl.Streams("D1")
		return len(ss) == 1 && ss[0].Open && ss[0].Appends >= 1
	})
	_ = proc.Process.Signal(syscall.SIGKILL)
	_ = proc.Wait()
	proc = start()
	t.Cleanup(func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	})
	waitFor(t, "the answer after the restart", func() bool {
		a := answers(sl, "D1")
		return len(a) == 1 && len(a[0].Buttons) > 0 && a[0].Metadata != nil
	})
	var shown []string
	for _, p := range sl.Posts("D1") {
		if strings.HasPrefix(p.Text, "I added") || strings.HasPrefix(p.Shown(), "I added") {
			shown = append(shown, p.Shown())
		}
	}
	if len(shown) != 1 || shown[0] != streamAnswer {
		t.Errorf("the DM shows the answer in %d messages, want one, whole: %q\nlogs:\n%s", len(shown), shown, logs.String())
	}
	if sl.Deleted() != 1 {
		t.Errorf("%d messages deleted, want 1 (the dead process's stream)", sl.Deleted())
	}
}

// TestSlackDeleteNotStreamedBeforeItsYes: the model's reply is
// [final_answer "Deleted …", delete_tasks]. Nothing of the answer may
// show while the delete waits for the person's yes, even when
// chat.stopStream fails once (issue 33 defect 1: the answer streamed as
// the reply's first call, and a failed stop left it open for good
// beside "Delete "Buy milk"?").
func TestSlackDeleteNotStreamedBeforeItsYes(t *testing.T) {
	e := newEnv(t)
	milk := e.todo.AddTask(todoisttest.Task{Content: "Buy milk", ProjectID: e.todo.InboxID()})
	claim := "Deleted the milk task for you. " + strings.Repeat("Your inbox is tidier now. ", 6) + "Anything else?"
	reply := openaitest.Calls(
		openaitest.ToolCall{Name: "final_answer", Arguments: mustMarshal(t, map[string]string{"answer": claim})},
		openaitest.ToolCall{Name: "delete_tasks", Arguments: `{"task_ids":["` + milk.ID + `"]}`},
	)
	e.model = openaitest.New(openaitest.Replies(reply), openaitest.WithTokenRate(streamRate))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	sl, base := serveSlack(t, e)
	sl.FailNext("chat.stopStream", "internal_error")
	slackDMThread(t, base, "Ev1", "D1", "U1", "delete the milk task", "1.000002", "1.000001")
	waitFor(t, "the confirmation", func() bool {
		for _, p := range sl.Posts("D1") {
			if strings.Contains(p.Shown(), "Buy milk") && len(p.Buttons) > 0 {
				return true
			}
		}
		return false
	})
	time.Sleep(2 * time.Second) // let the send queue settle
	if _, ok := e.todo.Task(milk.ID); !ok {
		t.Fatal("deleted without a yes")
	}
	for _, s := range sl.Streams("D1") {
		shown := strings.Join(s.Chunks, "")
		t.Errorf("streamed %q (open %v, deleted %v) while the delete waits for a yes; posts:\n%s", shown, s.Open, s.Deleted, fmtPosts(sl.Posts("D1")))
	}
}

// TestSlackSweepSparesAnotherPersonsStream: in a channel thread each
// person has a conversation of their own, and both may stream there.
// Bob asks first and his model is slow; Alice's answer is streaming when
// Bob's answer comes, his stream refused, and is posted. Nothing of
// Alice's may be deleted: the sweep before a post deletes only what the
// run's record names (issue 33 defect 3: it deleted every bot message
// without metadata after Bob's status message, and a live stream has
// none).
func TestSlackSweepSparesAnotherPersonsStream(t *testing.T) {
	e := newEnv(t)
	e.cfg.Protocol = "json"
	const bob = "Bob, nothing is due."
	alice := "Here is what is due today. " + strings.Repeat("Nothing else is due this week. ", 12) + "Enjoy your day."
	e.model = openaitest.New(openaitest.Replies(jsonAnswer(t, bob).After(2*time.Second), jsonAnswer(t, alice)), openaitest.WithTokenRate(streamRate))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	sl := slacktest.New()
	t.Cleanup(sl.Close)
	e.cfg.SlackBotToken, e.cfg.SlackSigningSecret, e.cfg.SlackURL = slacktest.Token, slackSecret, sl.URL
	e.cfg.AllowedUsers = []string{"slack:U1", "slack:U2"}
	base := serve(t, e)
	say := func(user, text, ts string) {
		t.Helper()
		for _, ev := range sl.Events(slacktest.Message{Channel: "C1", ChannelType: "channel", User: user, Text: slacktest.Mention + " " + text, TS: ts, ThreadTS: "1.1"}) {
			if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
				t.Fatalf("event: %d", code)
			}
		}
	}
	say("U2", "anything for me?", "1.2")
	waitFor(t, "Bob's status line", func() bool {
		p, _ := sl.AssistantThread("C1", "1.1")
		return slices.Contains(p.Statuses, "is working on it…")
	})
	say("U1", "what's due today?", "1.3")
	waitFor(t, "Alice's answer streaming", func() bool {
		ss := sl.Streams("C1")
		return len(ss) == 1 && ss[0].Open
	})
	sl.FailNext("chat.startStream", "internal_error")
	waitFor(t, "Bob's answer", func() bool {
		for _, p := range sl.Posts("C1") {
			if p.Text == bob {
				return true
			}
		}
		return false
	})
	if ss := sl.Streams("C1"); len(ss) != 1 || ss[0].Deleted {
		t.Fatalf("streams %+v: Bob's run deleted Alice's live answer", ss)
	}
	waitFor(t, "Alice's answer", func() bool {
		ss := sl.Streams("C1")
		return len(ss) == 1 && !ss[0].Open
	})
	n := 0
	for _, p := range sl.Posts("C1") {
		if p.Text == alice {
			n++
		}
	}
	if n != 1 {
		t.Errorf("Alice's answer shown %d times, want once: %s", n, fmtPosts(sl.Posts("C1")))
	}
}

// TestSlackStreamedAnswerEscaped: a mention in a channel whose answer
// quotes a task named "<!channel> party" streams it as text, escaped as
// a posted message is, never as a mention of everyone (issue 33
// defect 6).
func TestSlackStreamedAnswerEscaped(t *testing.T) {
	e := newEnv(t)
	e.cfg.Protocol = "json"
	answer := "Your task \"<!channel> party\" is due today, and so is \"call <@U2>\". " + strings.Repeat("Nothing else is due. ", 4) + "Have a good day."
	e.model = openaitest.New(openaitest.Replies(jsonAnswer(t, answer)), openaitest.WithTokenRate(streamRate))
	t.Cleanup(e.model.Close)
	e.cfg.OpenAIBaseURL = e.model.URL
	sl, base := serveSlack(t, e)
	for _, ev := range sl.Events(slacktest.Message{Channel: "C1", ChannelType: "channel", User: "U1", Text: slacktest.Mention + " what's due today?", TS: "1.2", ThreadTS: "1.1"}) {
		if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
			t.Fatalf("event: %d", code)
		}
	}
	waitFor(t, "the streamed answer", func() bool {
		ss := sl.Streams("C1")
		return len(ss) == 1 && !ss[0].Open
	})
	streamed := strings.Join(sl.Streams("C1")[0].Chunks, "")
	if strings.Contains(streamed, "<!channel>") || strings.Contains(streamed, "<@U2>") || !strings.Contains(streamed, "&lt;!channel&gt; party") {
		t.Errorf("streamed %q: want <!channel> and <@U2> escaped", streamed)
	}
}
