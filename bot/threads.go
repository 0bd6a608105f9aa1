package bot

import (
	"context"
	"errors"
	"fmt"
)

// KnowsThread reports whether the bot holds a conversation in a thread of
// a chat (it was addressed there before), so that an adapter can tell a
// reply meant for the bot from people talking among themselves. The
// answer comes from the store, so it survives restarts.
//
// In a shared chat each person has their own conversation (ThreadKey), so
// the thread is known when anyone's run started in it (knownThreadSetting).
func (b *Bot) KnowsThread(ctx context.Context, platform, chatID, threadID string) (bool, error) {
	in := Incoming{Platform: platform, ChatID: chatID, ThreadID: threadID}
	_, err := b.store.Setting(ctx, knownThreadSetting(in))
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, ErrNotFound):
		return false, fmt.Errorf("bot: read known thread %s: %w", knownThreadSetting(in), err)
	}
	in.DM = true // a conversation stored before conversations were per person
	key := in.ThreadKey()
	_, err = b.store.Thread(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("bot: read thread %s: %w", key, err)
	}
}

// knownThreadSetting names the setting that marks a thread of a shared
// chat where the bot holds a conversation.
func knownThreadSetting(in Incoming) string {
	return "known-thread:" + in.Platform + ":" + in.ChatID + ":" + in.ThreadID
}
