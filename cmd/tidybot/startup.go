package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tidybot/tidybot/adapters/console"
	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/bot"
)

// startupWait bounds each service's check at start-up.
const startupWait = 15 * time.Second

// checkTodoist asks Todoist who the token belongs to (GET /user) before
// chat or serve starts: a rejected token stops start-up with one line
// naming TODOIST_TOKEN; a Todoist that cannot be reached, or does not
// answer, is a warning (a laptop may start offline).
func checkTodoist(ctx context.Context, tasks *todoist.Client, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, startupWait)
	defer cancel()
	_, err := tasks.User(ctx)
	switch agent.ErrorCodeOf(err) {
	case "":
		if err != nil {
			log.Warn("could not check the Todoist token at start-up; starting anyway", slog.String("error", err.Error()))
		}
		return nil
	case agent.ErrUnauthorized:
		return err
	case agent.ErrUnreachable:
		log.Warn(unreachableWarning(err))
		return nil
	}
	log.Warn("could not check the Todoist token at start-up; starting anyway", slog.String("error", agent.ErrorMessageOf(err)))
	return nil
}

// unreachableWarning is the start-up line for a service that cannot be
// reached: its error's message (the service and the setting to check).
func unreachableWarning(err error) string {
	return agent.ErrorMessageOf(err) + "; starting anyway: messages will fail until it can be reached"
}

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

// unknownModel is the error for an OPENAI_MODEL the server says it does
// not serve.
func unknownModel(cfg Config) error {
	return fmt.Errorf("OPENAI_MODEL=%s does not exist at %s: choose a model it serves (default %s)", cfg.OpenAIModel, cfg.OpenAIBaseURL, openai.DefaultModel)
}
