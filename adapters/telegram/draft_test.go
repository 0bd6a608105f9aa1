package telegram_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/telegram/telegramtest"
	"github.com/tidybot/tidybot/bot"
)

// TestDraftsInPrivateChatsOnly: a private chat gets sendMessageDraft
// updates under one draft id, and no message (the answer is sent as
// usual); a group gets no draft; a server without the method refuses.
func TestDraftsInPrivateChatsOnly(t *testing.T) {
	a, srv := newAdapter(t, "")
	ctx := t.Context()
	st, err := a.StartStream(ctx, bot.Outgoing{ChatID: "42", Text: "Moved"}, "42")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, "Moved three tasks"); err != nil {
		t.Fatal(err)
	}
	if id, final, err := st.Finish(ctx, bot.Outgoing{ChatID: "42", Text: "Moved three tasks."}); err != nil || final || id != "" {
		t.Errorf("finish: %q %v %v; want the answer left to sendMessage", id, final, err)
	}
	ds := srv.Drafts(42)
	if len(ds) != 2 || ds[0].DraftID == 0 || ds[0].DraftID != ds[1].DraftID || ds[1].Text != "Moved three tasks" {
		t.Errorf("drafts %+v", ds)
	}
	if len(srv.Messages(42)) != 0 {
		t.Errorf("a draft made a message: %+v", srv.Messages(42))
	}
	if _, err := a.StartStream(ctx, bot.Outgoing{ChatID: "-100", Text: "Moved"}, "42"); err == nil || len(srv.Drafts(-100)) != 0 {
		t.Errorf("a group got a draft (err %v)", err)
	}
	if !a.StreamsIn("42", "") || a.StreamsIn("-100", "") || a.StreamsIn("not a chat", "") {
		t.Error("StreamsIn: want private chats only")
	}
	long := strings.Repeat("word ", 1000)
	if _, err := a.StartStream(ctx, bot.Outgoing{ChatID: "42", Text: long}, "42"); err != nil {
		t.Errorf("a long draft: %v (it shows its first 4,096 characters)", err)
	}
	srv.DraftsOff()
	if _, err := a.StartStream(ctx, bot.Outgoing{ChatID: "42", Text: "Moved"}, "42"); err == nil || !strings.Contains(err.Error(), "Not Found") {
		t.Errorf("an older Bot API server: %v", err)
	}
}

// TestDraftLapses: a draft vanishes about 30 seconds after it was sent
// (the fake enforces it, here shortened); the draft declares that lapse
// (bot.Lapsing), and the same text sent again, as the bot does before it
// lapses, is sent (not skipped) and keeps the draft shown.
func TestDraftLapses(t *testing.T) {
	a, srv := newAdapter(t, "")
	const lapse = 200 * time.Millisecond
	srv.SetDraftLapse(lapse)
	st, err := a.StartStream(t.Context(), bot.Outgoing{ChatID: "42", Text: "Moved"}, "42")
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := st.(bot.Lapsing); !ok || l.Lapse() != 30*time.Second || telegramtest.DraftLapse != 30*time.Second {
		t.Errorf("the draft declares no 30-second lapse (%T)", st)
	}
	for range 3 {
		time.Sleep(lapse / 2)
		if err := st.Update(t.Context(), "Moved"); err != nil {
			t.Fatal(err)
		}
	}
	if d, live := srv.LiveDraft(42); !live || d.Text != "Moved" || len(srv.Drafts(42)) != 4 {
		t.Errorf("a draft sent again before it lapses: live %v %+v, %d sent", live, d, len(srv.Drafts(42)))
	}
	time.Sleep(lapse + lapse/2)
	if _, live := srv.LiveDraft(42); live {
		t.Error("a draft is still shown after its lapse")
	}
}
