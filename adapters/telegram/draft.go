package telegram

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/utf16text"
)

var (
	_ bot.Streamer = (*Adapter)(nil)
	_ bot.Lapsing  = (*draft)(nil)
)

// draftInterval spaces a draft's updates: the Bot API sets no figure
// for drafts, and Telegram asks bots not to send more than about one
// message a second to one chat (core.telegram.org/bots/faq, "My bot is
// hitting limits, how do I avoid this?").
const draftInterval = time.Second

// draftLapse is how long a draft is shown when it is not sent again:
// "the streamed draft is ephemeral and acts as a temporary 30-second
// preview" (core.telegram.org/bots/api#sendmessagedraft).
const draftLapse = 30 * time.Second

// errNotPrivate: sendMessageDraft takes only a private chat
// (core.telegram.org/bots/api#sendmessagedraft: chat_id, "Unique
// identifier for the target private chat"). A private chat's id is the
// person's user id, positive; groups' and channels' are negative
// (core.telegram.org/bots/api#chat).
var errNotPrivate = errors.New("telegram: drafts are shown in private chats only")

// draftSeq numbers drafts: a draft_id must be non-zero, and changes to
// the draft with one id are animated (#sendmessagedraft).
var draftSeq atomic.Int64

// StartStream implements bot.Streamer with sendMessageDraft (Bot API
// 9.3), in a private chat only. telegram-bot-api v5.5.1 predates the
// method: it goes through the library's generic MakeRequest, as Ack's
// setMessageReaction does. The draft is an ephemeral preview; the answer
// itself is sent with sendMessage, as always (Finish leaves it to the
// bot).
// StreamsIn implements bot.StreamPlacer: drafts are for private chats
// only (sendMessageDraft), whose ids are positive.
func (a *Adapter) StreamsIn(chat, _ string) bool {
	id, err := chatID(chat)
	return err == nil && id > 0
}

func (a *Adapter) StartStream(ctx context.Context, m bot.Outgoing, _ string) (bot.Stream, error) {
	chat, err := chatID(m.ChatID)
	if err != nil {
		return nil, err
	}
	if chat <= 0 {
		return nil, errNotPrivate
	}
	d := &draft{a: a, chat: m.ChatID, id: strconv.FormatInt(draftSeq.Add(1), 10)}
	if err := d.Update(ctx, m.Text); err != nil {
		return nil, err
	}
	return d, nil
}

// draft is one answer's draft in a private chat.
type draft struct {
	a    *Adapter
	chat string
	id   string
}

// Update implements bot.Stream: the draft shows text (its first 4,096
// UTF-16 units: sendMessageDraft's text is "1-4096 characters").
func (d *draft) Update(ctx context.Context, text string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if parts := utf16text.Split(text, maxText); len(parts) > 0 {
		text = parts[0]
	}
	// The same text again is sent again: a draft lapses (Lapse), and a
	// long answer's full draft (its first part unchanged) is kept shown
	// by the updates that follow; both at most once per Interval.
	_, err := d.a.api.MakeRequest("sendMessageDraft", tgbotapi.Params{"chat_id": d.chat, "draft_id": d.id, "text": text})
	if err != nil {
		return d.a.wrap("show draft", err)
	}
	return nil
}

// Lapse implements bot.Lapsing: the bot sends the draft again before it
// vanishes while the answer pauses.
func (d *draft) Lapse() time.Duration { return draftLapse }

// Interval implements bot.Stream.
func (d *draft) Interval() time.Duration { return draftInterval }

// Finish implements bot.Stream: a draft is not a message; the answer is
// sent with sendMessage (the draft gives way to it), so nothing is done
// here.
func (d *draft) Finish(context.Context, bot.Outgoing) (string, bool, error) {
	return "", false, nil
}
