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
func (b *Bot) KnowsThread(ctx context.Context, platform, chatID, threadID string) (bool, error) {
	key := Incoming{Platform: platform, ChatID: chatID, ThreadID: threadID}.ThreadKey()
	_, err := b.store.Thread(ctx, key)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, ErrNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("bot: read thread %s: %w", key, err)
	}
}
