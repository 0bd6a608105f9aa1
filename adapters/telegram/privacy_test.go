package telegram_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram"
	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/bot"
)

// TestPrivacyModeToldAtStartUp: getMe's can_read_all_group_messages
// decides what the owner is told reaches the bot in groups.
func TestPrivacyModeToldAtStartUp(t *testing.T) {
	for _, off := range []bool{false, true} {
		srv := telegramtest.New()
		t.Cleanup(srv.Close)
		if off {
			srv.PrivacyOff()
		}
		var logs bytes.Buffer
		if _, err := telegram.New(telegram.Config{Token: srv.Token, APIURL: srv.URL, PollTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
			t.Fatal(err)
		}
		want := "privacy mode is on"
		if off {
			want = "privacy mode is off"
		}
		if !strings.Contains(logs.String(), want) || off == strings.Contains(logs.String(), "/setprivacy") {
			t.Errorf("privacy off %v: logs %q, want %q and, when on, how to turn it off", off, logs.String(), want)
		}
	}
}

// TestGroupQuestionAsksForAReply: in a group, a question without
// buttons asks for its answer as a reply (ForceReply), the one typed
// answer privacy mode lets through; in a DM, or with buttons, it does not.
func TestGroupQuestionAsksForAReply(t *testing.T) {
	a, srv := newAdapter(t, "")
	for _, tt := range []struct {
		m    bot.Outgoing
		want bool
	}{
		{bot.Outgoing{ChatID: "-100", Text: "Which project?", Question: true}, true},
		{bot.Outgoing{ChatID: "-100", Text: "Delete 1 task?", Question: true, Buttons: []bot.Button{{Label: "Delete", Data: "w:k:y"}}}, false},
		{bot.Outgoing{ChatID: "-100", Text: "Done."}, false},
		{bot.Outgoing{ChatID: "42", Text: "Which project?", Question: true}, false},
	} {
		if _, err := a.Send(t.Context(), tt.m); err != nil {
			t.Fatal(err)
		}
		ms := srv.Messages(map[string]int64{"-100": -100, "42": 42}[tt.m.ChatID])
		if got := ms[len(ms)-1].ForceReply; got != tt.want {
			t.Errorf("%+v: force_reply %v, want %v", tt.m, got, tt.want)
		}
	}
	if got := a.SharedCommandName("tidy-inbox"); got != "/tidy_inbox@"+telegramtest.BotUserName {
		t.Errorf("SharedCommandName = %q", got)
	}
}
