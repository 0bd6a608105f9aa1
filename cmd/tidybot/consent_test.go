package main

import (
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// holdDelete points e at a model that, when it asks to delete, reports
// on calling and waits for gate to close: the run is working ("🤔 Working
// on it…") until the test lets it go on.
func holdDelete(t *testing.T, e *env) (calling, gate chan struct{}) {
	calling, gate = make(chan struct{}, 10), make(chan struct{})
	model := openaitest.New(openaitest.FromAgent(func(req agent.Request) agent.Response {
		resp := e.scen.reply(req)
		if len(resp.ToolCalls) > 0 && resp.ToolCalls[0].Name == agent.ActDeleteTasks {
			calling <- struct{}{}
			<-gate
		}
		return resp
	}))
	t.Cleanup(model.Close)
	e.cfg.OpenAIBaseURL = model.URL
	return calling, gate
}

// TestSlackEarlyMessageIsNotConsent: in a Slack DM, "ok thanks" typed
// while the run works (before it asks to delete) confirms nothing; the
// next message, "yes?", typed after the question, is the answer, and a
// question is no yes: the task stays.
func TestSlackEarlyMessageIsNotConsent(t *testing.T) {
	e := newEnv(t)
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	calling, gate := holdDelete(t, e)
	sl, base := serveSlack(t, e)
	dm := func(text string) {
		t.Helper()
		for _, ev := range sl.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: text, TS: sl.NextTS()}) {
			if code := postSigned(t, base+"/slack/events", "application/json", ev, slackSecret); code != 200 {
				t.Fatalf("event: %d", code)
			}
		}
	}
	dm("delete the cake task")
	<-calling
	dm("ok thanks")
	close(gate)
	waitFor(t, "the confirmation", func() bool {
		for _, p := range sl.Posts("D1") {
			if strings.Contains(p.Text, "This cannot be undone") {
				return true
			}
		}
		return false
	})
	dm("yes?")
	// Either the run hears "yes?", or (had "ok thanks" been its answer)
	// a new run does.
	waitFor(t, "the answer to yes?", func() bool { return strings.Contains(lastPost(sl, "D1").Text, "yes?") })
	if n := len(e.todo.Tasks()); n != 1 {
		t.Errorf("tasks = %d, want 1: the cake task was deleted", n)
	}
	for _, p := range sl.Posts("D1") {
		if strings.Contains(p.Text, "Deleted") {
			t.Errorf("posted %q", p.Text)
		}
	}
}

// TestTelegramEarlyMessageIsNotConsent: on Telegram, "ok thanks" sent
// while the run works (a smaller message_id than the question's) leaves
// the question open; the "yes" sent after it deletes, once.
func TestTelegramEarlyMessageIsNotConsent(t *testing.T) {
	e := newEnv(t)
	e.todo.AddTask(todoisttest.Task{Content: "Buy cake for the office"})
	calling, gate := holdDelete(t, e)
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "delete the cake task")
	<-calling
	early := tg.PushText(42, 42, "ok thanks")
	close(gate)
	var question telegramtest.Sent
	waitFor(t, "the confirmation", func() bool {
		for _, m := range tg.Messages(42) {
			if strings.Contains(m.Text, "This cannot be undone") {
				question = m
				return true
			}
		}
		return false
	})
	if tg.MessageID(early) >= question.MessageID {
		t.Fatalf("ok thanks has message_id %d, the question %d: want it before", tg.MessageID(early), question.MessageID)
	}
	tg.PushText(42, 42, "yes")
	waitFor(t, "the answer to yes", func() bool {
		last := lastText(tg, 42)
		return last == "Deleted the cake task." || strings.HasPrefix(last, "You said")
	})
	var texts []string
	for _, m := range tg.Messages(42) {
		texts = append(texts, m.Text)
	}
	if got := strings.Join(texts, "\n---\n"); strings.Count(got, "Deleted the cake task.") != 1 || strings.Contains(got, "You said: yes") {
		t.Errorf("messages:\n%s\nwant the delete confirmed by the yes sent after the question, once", got)
	}
	if n := len(e.todo.Tasks()); n != 0 {
		t.Errorf("tasks = %d, want 0", n)
	}
}
