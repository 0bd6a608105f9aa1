package telegram_test

import (
	"strconv"
	"strings"
	"testing"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// Ack reacts 👀 to the person's message through the client library's
// generic request path; the fake records it.
func TestAckReactsWithEyes(t *testing.T) {
	a, srv := newAdapter(t, "")
	id := srv.MessageID(srv.PushText(42, 7, "tidy my inbox"))
	if err := a.Ack(t.Context(), "42", strconv.Itoa(id)); err != nil {
		t.Fatal(err)
	}
	r := srv.Reactions()
	if len(r) != 1 || r[0].ChatID != 42 || r[0].MessageID != id || strings.Join(r[0].Emoji, "") != "👀" {
		t.Fatalf("reactions: %+v", r)
	}
}

// Where Telegram refuses (a message not in the chat, a group with
// reactions off), Ack returns the error; nothing is recorded.
func TestAckRefused(t *testing.T) {
	a, srv := newAdapter(t, "")
	id := srv.MessageID(srv.PushText(42, 7, "hi"))
	if err := a.Ack(t.Context(), "43", strconv.Itoa(id)); err == nil || !strings.Contains(err.Error(), "message to react not found") {
		t.Errorf("another chat's message: err = %v", err)
	}
	srv.ReactionsOff(42)
	if err := a.Ack(t.Context(), "42", strconv.Itoa(id)); err == nil || !strings.Contains(err.Error(), "REACTION_INVALID") {
		t.Errorf("reactions off: err = %v", err)
	}
	if r := srv.Reactions(); len(r) != 0 {
		t.Errorf("reactions: %+v", r)
	}
}

// The fake enforces the documented rules on setMessageReaction
// (core.telegram.org/bots/api#setmessagereaction, #reactiontypeemoji),
// asked through the real client library.
func TestFakeSetMessageReactionRules(t *testing.T) {
	_, srv := newAdapter(t, "")
	api, err := tgbotapi.NewBotAPIWithAPIEndpoint(srv.Token, srv.URL+"/bot%s/%s")
	if err != nil {
		t.Fatal(err)
	}
	id := strconv.Itoa(srv.MessageID(srv.PushText(42, 7, "hi")))
	for _, c := range []struct{ reaction, chat, msg, want string }{
		{`[{"type":"emoji","emoji":"🦖"}]`, "42", id, "REACTION_INVALID"},
		{`[{"type":"emoji","emoji":"👀"},{"type":"emoji","emoji":"👍"}]`, "42", id, "REACTIONS_TOO_MANY"},
		{`[{"type":"emoji","emoji":"👀"}]`, "42", "99999", "message to react not found"},
		{`[{"type":"emoji","emoji":"👀"}]`, "42", "0", "message to react not found"},
		{`[{"type":"emoji","emoji":"👀"}]`, "", id, "chat_id is empty"},
		{`not json`, "42", id, "Can't parse reaction types JSON object"},
		{`[{"type":"emoji","emoji":"👍"}]`, "42", id, ""},
		{`[]`, "42", id, ""},
	} {
		_, err := api.MakeRequest("setMessageReaction", tgbotapi.Params{"chat_id": c.chat, "message_id": c.msg, "reaction": c.reaction})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s on %s: err = %v, want %q", c.reaction, c.msg, err, c.want)
		}
	}
	if r := srv.Reactions(); len(r) != 2 || strings.Join(r[0].Emoji, "") != "👍" || len(r[1].Emoji) != 0 {
		t.Errorf("reactions: %+v", r)
	}
}
