package telegram

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"github.com/tidybot/tidybot/bot"
)

// batchLanes is how many chats of one getUpdates answer are stored at
// once: as many as a webhook's connections by default (setWebhook's
// max_connections, 40: core.telegram.org/bots/api#setwebhook), so that
// long polling and a webhook load the store alike.
const batchLanes = 40

// storeBatch hands a getUpdates answer's updates to h: the updates of one
// chat one after another, in order, and different chats at once (up to
// batchLanes), so that the last of 100 people who wrote at once does not
// wait for the 99 commits before theirs. It returns the offset that
// confirms what was stored: past every update when all were, else the
// first one not stored (the updates after it are delivered again and
// dropped by the bot as duplicates of their update id). stop is set when
// ctx ended or the bot is stopping, failed when a store failed.
func (a *Adapter) storeBatch(ctx context.Context, h bot.Handler, updates []update, offset int) (next int, stop, failed bool) {
	if len(updates) == 0 {
		return offset, false, false
	}
	var order []string
	lanes := map[string][]int{} // chat → indexes into updates, in order
	for i, u := range updates {
		k := laneOf(u)
		if _, ok := lanes[k]; !ok {
			order = append(order, k)
		}
		lanes[k] = append(lanes[k], i)
	}
	stored := make([]bool, len(updates))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, batchLanes)
	for _, k := range order {
		wg.Add(1)
		sem <- struct{}{}
		go func(idx []int) {
			defer wg.Done()
			defer func() { <-sem }()
			for _, i := range idx {
				u := updates[i]
				if u.err != nil {
					a.undecodable(u.id, u.err) // confirmed: Telegram drops it
				} else if err := a.dispatch(ctx, h, u); err != nil {
					mu.Lock()
					if ctx.Err() != nil || errors.Is(err, bot.ErrStopped) {
						stop = true
					} else {
						failed = true
						a.log.Error("telegram update not stored; retrying", slog.Int("update_id", u.id), slog.Any("err", redact(err, a.cfg.Token)))
					}
					mu.Unlock()
					return // the chat's later updates wait for this one
				}
				mu.Lock()
				stored[i] = true
				mu.Unlock()
			}
		}(lanes[k])
	}
	wg.Wait()
	next = offset
	for i, u := range updates {
		if !stored[i] {
			break
		}
		next = u.id + 1
	}
	return next, stop, failed
}

// laneOf names the chat an update belongs to; updates of one chat keep
// their order. A button press without its message (inline mode) goes by
// the person who pressed it; anything else without a chat shares one
// lane.
func laneOf(u update) string {
	if u.err != nil {
		return "undecodable"
	}
	var chat *tgbotapi.Chat
	switch {
	case u.Message != nil:
		chat = u.Message.Chat
	case u.CallbackQuery != nil && u.CallbackQuery.Message != nil:
		chat = u.CallbackQuery.Message.Chat
	case u.CallbackQuery != nil && u.CallbackQuery.From != nil:
		return "from:" + strconv.FormatInt(u.CallbackQuery.From.ID, 10)
	}
	if chat == nil {
		return "none"
	}
	return "chat:" + strconv.FormatInt(chat.ID, 10)
}
