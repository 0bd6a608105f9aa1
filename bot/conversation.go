package bot

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/tidybot/tidybot/agent"
)

// The commands that act on a conversation as a whole, beside its runs:
// /usage and /reset (undo.go has /undo).

// usage reports the tokens this thread's runs used.
func (b *Bot) usage(ctx context.Context, in Incoming) {
	runs, err := b.store.ThreadRuns(ctx, in.ThreadKey())
	if err != nil {
		b.log.Error("usage", slog.Any("err", err))
		b.replyLater(ctx, in.Platform, reply(in, "I could not read the usage; the details are in the log."))
		return
	}
	var u agent.Usage
	for _, r := range runs {
		u.Add(r.Usage)
	}
	text := fmt.Sprintf("This conversation used %s (%d prompt, %d completion) in %s over %s.",
		plural(u.Total(), "token"), u.PromptTokens, u.CompletionTokens, plural(u.Calls, "model call"), plural(len(runs), "run"))
	if u.ReasoningTokens > 0 || u.CachedTokens > 0 {
		text += fmt.Sprintf(" Of these, %d completion tokens were the model's reasoning and %d prompt tokens came from the server's cache.", u.ReasoningTokens, u.CachedTokens)
	}
	if u.Estimated {
		text += " Some counts are estimates: the model server reported none."
	}
	if fb := feedbackText(runs); fb != "" {
		text += "\n" + fb
	}
	if b.cfg.Accounts != nil || b.cfg.UserDailyTokens > 0 {
		text += "\n" + b.personUsageText(ctx, in)
	}
	b.replyLater(ctx, in.Platform, reply(in, text))
}

// reset forgets the thread: its stored messages and runs are deleted.
// Its job (jobID) is handled once the confirmation is in the outbox.
func (b *Bot) reset(ctx context.Context, jobID string, in Incoming) error {
	key := in.ThreadKey()
	th, err := b.store.Thread(ctx, key)
	if err != nil {
		return fmt.Errorf("bot: read thread %s: %w", key, err)
	}
	if err := b.dropWaiting(ctx, key, "reset"); err != nil {
		return err
	}
	th.ResetAt = b.cfg.Now()
	if err := b.store.SaveThread(ctx, th); err != nil {
		return fmt.Errorf("bot: reset thread %s: %w", key, err)
	}
	// Forgetting deletes: the stored messages and runs go, not only
	// out of the model's sight.
	if err := b.store.DeleteConversation(ctx, key); err != nil {
		return fmt.Errorf("bot: delete conversation %s: %w", key, err)
	}
	// Through the outbox, as an answer: a crash before the post keeps it.
	ob := b.outbound(in.Platform, reply(in, "I forgot our conversation here. Your Todoist is unchanged."))
	if err := b.commit(ctx, Change{Send: []Outbound{ob}, DeleteJob: jobID}); err != nil {
		return fmt.Errorf("bot: queue reset confirmation for %s: %w", key, err)
	}
	b.deliver(ctx, ob)
	return nil
}

// plural formats a count with its noun: "1 run", "3 runs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
