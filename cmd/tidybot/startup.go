package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tidybot/tidybot/adapters/console"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
)

// failedRuns returns an error when a run of the terminal's conversation
// that ended after since failed, so that `tidybot chat` fed by a script
// exits non-zero; the answer saying why was printed already.
func (m *Main) failedRuns(ctx context.Context, since time.Time) error {
	key := bot.Incoming{Platform: console.Platform, ChatID: console.ChatID, UserID: console.UserID, DM: true}.ThreadKey()
	runs, err := m.store.ThreadRuns(ctx, key)
	if err != nil {
		return fmt.Errorf("chat: read the runs' outcome: %w", err)
	}
	slices.SortFunc(runs, func(a, b *bot.Run) int { return a.Updated.Compare(b.Updated) })
	var failed []*bot.Run
	for _, r := range runs {
		if r.Status == bot.RunFailed && !r.Updated.Before(since) {
			failed = append(failed, r)
		}
	}
	switch len(failed) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("chat: a run failed: %s", firstLine(failed[0].Answer))
	}
	return fmt.Errorf("chat: %d runs failed; the last: %s", len(failed), firstLine(failed[len(failed)-1].Answer))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}

// todoistBackoff is the Todoist clients' backoff: the default, or
// m.backoff in tests.
func (m *Main) todoistBackoff() todoist.Option {
	if m.backoff <= 0 {
		return func(*todoist.Client) {}
	}
	return todoist.WithBackoff(m.backoff, m.backoff)
}
