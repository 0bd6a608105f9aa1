package bot

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// A button's data is "<kind>:<argument>" (≤ 64 bytes: Telegram's
// limit); the kind says which handler a press of it reaches. pressKinds
// is the one table of them, as commands is of the commands: a new
// button is a new row, and a press of a kind not listed is answered "I
// don't know that button".
type pressKind struct {
	// prefix starts the data of its buttons, up to and with the first
	// colon ("u:").
	prefix string
	// handle handles a press; arg is the data after prefix. Every press
	// is answered (answerButtonLater) by the handler; an error means the
	// platform should deliver the press again.
	handle func(b *Bot, ctx context.Context, in Incoming, arg string) error
}

// pressKinds is every kind of button the bot posts.
var pressKinds = []pressKind{
	// A choice under a question (ask_user, a confirmation): w:<key>:<choice>.
	{prefix: answerPrefix, handle: (*Bot).pressAnswer},
	// Undo under an answer: u:<run id>.
	{prefix: undoButtonPrefix, handle: func(b *Bot, ctx context.Context, in Incoming, runID string) error {
		if runID == "" {
			return b.unknownPress(ctx, in)
		}
		return b.pressUndo(ctx, in, runID)
	}},
	// 👍 or 👎 under an answer: f:<run id>:<g|b>.
	{prefix: feedbackPrefix, handle: func(b *Bot, ctx context.Context, in Incoming, _ string) error {
		runID, rating, ok := feedbackButton(in.Button)
		if !ok {
			return b.unknownPress(ctx, in)
		}
		return b.pressFeedback(ctx, in, runID, rating)
	}},
	// A /settings choice: set:<name>:<value>.
	{prefix: settingButton, handle: (*Bot).pressSetting},
	// The morning digest's move, tidy and snooze (digestMove, …).
	{prefix: "dg:", handle: func(b *Bot, ctx context.Context, in Incoming, _ string) error {
		return b.pressDigest(ctx, in)
	}},
	// Stop autopilot under its message (stopAutopilotButton).
	{prefix: "ap:", handle: func(b *Bot, ctx context.Context, in Incoming, _ string) error {
		if in.Button != stopAutopilotButton {
			return b.unknownPress(ctx, in)
		}
		return b.pressStopAutopilot(ctx, in)
	}},
}

// pressKindOf returns the kind of a button's data, nil for none.
func pressKindOf(data string) *pressKind {
	i := strings.IndexByte(data, ':')
	if i < 0 {
		return nil
	}
	for k := range pressKinds {
		if pressKinds[k].prefix == data[:i+1] {
			return &pressKinds[k]
		}
	}
	return nil
}

// press handles a button press by its kind (pressKinds).
func (b *Bot) press(ctx context.Context, in Incoming) error {
	k := pressKindOf(in.Button)
	if k == nil {
		return b.unknownPress(ctx, in)
	}
	return k.handle(b, ctx, in, in.Button[len(k.prefix):])
}

// unknownPress answers a press of a button the bot does not know.
func (b *Bot) unknownPress(ctx context.Context, in Incoming) error {
	b.answerButtonLater(ctx, in, "I don't know that button.")
	return nil
}

// answerButtonLater queues the answer to a button press without waiting.
// A press on the Home (HomePrefix) is answered on the Home: its publish
// with text as its notice is queued before the press's job can queue
// its own (publishHome).
func (b *Bot) answerButtonLater(ctx context.Context, in Incoming, text string) {
	if strings.HasPrefix(in.Button, HomePrefix) {
		if err := b.publishHome(ctx, in, text); err != nil {
			b.log.Warn("answer a press on the Home", slog.String("platform", in.Platform), slog.String("user_id", in.UserID), slog.Any("err", err))
		}
		return
	}
	if q := b.queue(in.Platform); q != nil {
		q.answerLater(in.ButtonRef, text)
	}
}

// answerPrefix starts the data of a question's choices.
const answerPrefix = "w:"

// answerData is the data of the choice under the question waiting on
// key: "w:<key>:<choice>", choice y, n or an option's index.
func answerData(key, choice string) string { return answerPrefix + key + ":" + choice }

// pressAnswer handles a choice under a question: only the asked user
// may answer; the press is answered; the answer then goes through the
// thread's queue.
func (b *Bot) pressAnswer(ctx context.Context, in Incoming, _ string) error {
	key, _, ok := parseButton(in.Button)
	if !ok {
		return b.unknownPress(ctx, in)
	}
	r, err := b.store.WaitingRunByKey(ctx, key)
	if err != nil {
		return fmt.Errorf("bot: find the run waiting on %s: %w", key, err)
	}
	switch {
	case r == nil:
		b.answerButtonLater(ctx, in, "This question is no longer open.")
		return nil
	case askedUser(r) != in.UserID:
		b.answerButtonLater(ctx, in, "Only the person who asked can answer this.")
		return nil
	}
	b.answerButtonLater(ctx, in, "")
	in = into(in, r)
	in.Text = buttonAnswer(r.Waiting, in.Button)
	return b.enqueue(ctx, in)
}

// parseButton splits "w:<key>:<choice>".
func parseButton(data string) (key, choice string, ok bool) {
	parts := strings.Split(data, ":")
	if len(parts) != 3 || parts[0]+":" != answerPrefix || parts[1] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[1], parts[2], true
}

// buttonAnswer is the answer a pressed button stands for.
func buttonAnswer(w *Waiting, data string) string {
	key, choice, ok := parseButton(data)
	if !ok || w == nil || key != w.Key {
		return ""
	}
	switch choice {
	case "y":
		return "yes"
	case "n":
		return "no"
	}
	if i, err := strconv.Atoi(choice); err == nil && i >= 0 && i < len(w.Options) {
		return w.Options[i]
	}
	return ""
}
