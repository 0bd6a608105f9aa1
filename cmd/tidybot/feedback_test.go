package main

import (
	"strings"
	"testing"

	"github.com/tidybot/tidybot/adapters/slack/slacktest"
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
