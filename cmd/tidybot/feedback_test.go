package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
)

// On Slack the answer carries Slack's own feedback buttons; the asker's
// 👎 press (a block_actions payload of type feedback_buttons) reaches
// `tidybot serve` and is stored with the run: `tidybot runs` shows it.
func TestSlackFeedbackButtons(t *testing.T) {
	e := newEnv(t)
	sl, base := serveSlack(t, e)
	ev := sl.Events(slacktest.Message{Channel: "D1", ChannelType: "im", User: "U1", Text: "hello", TS: sl.NextTS()})
	if code := postSigned(t, base+"/slack/events", "application/json", ev[0], slackSecret); code != 200 {
		t.Fatalf("message: %d", code)
	}
	waitFor(t, "the answer", func() bool { return lastPost(sl, "D1").Text == "You said: hello" })
	ans := lastPost(sl, "D1")
	if len(ans.Feedback) != 2 || len(ans.Buttons) != 0 {
		t.Fatalf("answer %+v: want Slack's feedback buttons and no other button", ans)
	}
	form, err := sl.FeedbackPress(ans, "U1", false)
	if err != nil {
		t.Fatal(err)
	}
	if code := postSigned(t, base+"/slack/interactivity", "application/x-www-form-urlencoded", []byte(form.Encode()), slackSecret); code != 200 {
		t.Fatalf("press: %d", code)
	}
	waitFor(t, "the rating in tidybot runs", func() bool { return strings.Contains(runsCmd(t, e), "👎") })
}

// On Telegram the answer ends with 👍 and 👎 inline buttons, side by
// side; the asker's press is stored with the run and answered.
func TestTelegramFeedbackButtons(t *testing.T) {
	e := newEnv(t)
	e.cfg.AllowedUsers = []string{"telegram:42"}
	tg := serveTelegram(t, e)
	tg.PushText(42, 42, "hello")
	waitFor(t, "the answer", func() bool { ms := tg.Messages(42); return len(ms) > 0 && ms[len(ms)-1].Text == "You said: hello" })
	ms := tg.Messages(42)
	ans := ms[len(ms)-1]
	if len(ans.Labels) != 2 || ans.Labels[0] != "👍" || ans.Labels[1] != "👎" {
		t.Fatalf("answer buttons %q", ans.Labels)
	}
	tg.PushCallback(42, 42, ans.MessageID, ans.Buttons[0])
	waitFor(t, "the rating in tidybot runs", func() bool { return strings.Contains(runsCmd(t, e), "👍") })
	waitFor(t, "the press answered", func() bool { return strings.Contains(strings.Join(tg.Answers(), "\n"), "Noted 👍") })
}

// A 👎 becomes a draft eval task: after serve stops, `tidybot eval
// -from-feedback` prints, for the rated run, Go source of an eval.Task
// with the person's words as its turn and the goal left to fill in; a
// database without a 👎 drafts nothing and says so.
func TestEvalFromFeedback(t *testing.T) {
	e := newEnv(t)
	e.cfg.AllowedUsers = []string{"telegram:42"}
	tg := telegramtest.New()
	t.Cleanup(tg.Close)
	e.cfg.TelegramToken, e.cfg.TelegramURL = tg.Token, tg.URL
	srv := startServe(t, e, nil)
	eval := func() (string, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		m := &Main{Args: []string{"eval", "-from-feedback"}, Config: &e.cfg, Stdout: &out, Stderr: &errOut}
		err := m.Run(t.Context())
		if cerr := m.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatalf("eval -from-feedback: %v\n%s", err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	tg.PushText(42, 42, "hello")
	waitFor(t, "the answer", func() bool { ms := tg.Messages(42); return len(ms) > 0 && ms[len(ms)-1].Text == "You said: hello" })
	srv.stop()
	if out, errOut := eval(); out != "" || !strings.Contains(errOut, "No run is rated 👎 yet") {
		t.Errorf("without a 👎: %q, %q", out, errOut)
	}
	srv = startServe(t, e, nil)
	ms := tg.Messages(42)
	tg.PushCallback(42, 42, ms[len(ms)-1].MessageID, ms[len(ms)-1].Buttons[1])
	waitFor(t, "the 👎", func() bool { return strings.Contains(runsCmd(t, e), "👎") })
	srv.stop()
	out, _ := eval()
	for _, want := range []string{"eval.Task{", `Turns: []eval.Turn{{Message: "hello"}}`, "Goal: []eval.Predicate{", "// TODO: what the data must look like", "// The bot answered: You said: hello"} {
		if !strings.Contains(out, want) {
			t.Errorf("draft lacks %q:\n%s", want, out)
		}
	}
}
