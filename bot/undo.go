package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// undo reverts the last run of the conversation that changed something.
// Pressed as the Undo button of an earlier run's answer, it reverts
// nothing when a later run changed things since: undo goes latest first.
// Its job (jobID) is handled once the report is in the outbox.
//
// A run waiting for the user holds the latest changes when it wrote
// before asking: /undo reverts those and stops the run (its question
// would be about a state that is gone). When it wrote nothing, the run
// before it is undone and the report says so; the question stays open.
func (b *Bot) undo(ctx context.Context, jobID string, in Incoming) error {
	waiting, err := b.waitingRun(ctx, in.ThreadKey())
	if err != nil {
		return err
	}
	r, entries, err := b.lastWrites(ctx, in.ThreadKey())
	if err != nil {
		return err
	}
	if pressed, ok := undoButton(in.Button); ok && (r == nil || r.ID != pressed) {
		text := "Those changes are already undone."
		if r != nil && r.Created.After(b.runCreated(ctx, pressed)) {
			text = "A later run changed things since; " + b.commandName(in.Platform, "undo") + " reverts the latest run first."
		}
		b.send(ctx, in.Platform, reply(in, text))
		b.undoneOnHome(ctx, in, text)
		return nil
	}
	if r == nil {
		b.send(ctx, in.Platform, reply(in, "There is nothing to undo here."))
		return nil
	}
	journal := appliedOf(entries)
	ag, err := b.agentFor(ctx, r.Platform, r.UserID)
	if err != nil {
		return fmt.Errorf("bot: undo run %s: %w", r.ID, err)
	}
	// The Home published after (undoneOnHome) shows the connection
	// just found, not looked up again.
	ctx = accountKnown(ctx, r.Platform, r.UserID, nil)
	rep, err := ag.Undo(ctx, journal)
	if err != nil {
		return fmt.Errorf("bot: undo run %s: %w", r.ID, err)
	}
	r.Undone, r.Updated = true, b.cfg.Now()
	which := "the last run"
	switch {
	case waiting != nil && waiting.ID == r.ID:
		// Its question is about a state that is gone: the run stops.
		b.clearButtons(ctx, r, "(dropped: undone)")
		r.Status, r.Waiting = RunCancelled, nil
		which = "the run that was waiting for your answer; I stopped it and dropped its question"
	case waiting != nil:
		which = "the run before the one waiting for your answer (that one has changed nothing yet; its question stays open)"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "↩️ Undid %d of %d changes of %s. Reverted:", len(rep.Undone), len(rep.Undone)+len(rep.NotUndone), which)
	for i, s := range rep.Undone {
		if i == 15 {
			fmt.Fprintf(&sb, "\n• … and %d more", len(rep.Undone)-15)
			break
		}
		sb.WriteString("\n• " + s)
	}
	if len(rep.NotUndone) > 0 {
		sb.WriteString("\nCould not undo:")
		for _, s := range rep.NotUndone {
			sb.WriteString("\n• " + s)
		}
	}
	// A rating given while the undo ran is kept: pressFeedback saves the
	// run on its own.
	if cur, err := b.store.Run(ctx, r.ID); err == nil {
		r.Feedback = cur.Feedback
	}
	// The report goes into the outbox in the transaction that marks the
	// run undone, as finish does with an answer: a crash before the post
	// keeps it for the next start.
	ob := b.outbound(in.Platform, reply(in, b.fit(in.Platform, sb.String())))
	if err := b.commit(ctx, Change{Run: r, Send: []Outbound{ob}, DeleteJob: jobID}); err != nil {
		return fmt.Errorf("bot: save run %s: %w", r.ID, err)
	}
	if in.Button != "" {
		b.dropUndoButton(ctx, in, r)
	}
	b.deliver(ctx, ob)
	b.undoneOnHome(ctx, in, ob.Msg.Text)
	return nil
}

// undoneOnHome publishes the Home again after an Undo pressed there,
// saying what the undo did (the report also went to the conversation).
// A failure is logged: the undo is done.
func (b *Bot) undoneOnHome(ctx context.Context, in Incoming, said string) {
	if !strings.HasPrefix(in.Button, HomePrefix) {
		return
	}
	if err := b.publishHome(ctx, in, said); err != nil {
		b.log.Warn("publish the Home after an undo", slog.String("platform", in.Platform), slog.String("user_id", in.UserID), slog.Any("err", err))
	}
}

// lastWrites finds the conversation's latest run that changed something
// and is not undone, with its journal; nil when there is none. A run
// waiting for the user counts: its writes so far are the latest changes
// (a run working or queued does not: /undo waits for its turn behind it).
func (b *Bot) lastWrites(ctx context.Context, key string) (*Run, []AuditEntry, error) {
	runs, err := b.store.ThreadRuns(ctx, key)
	if err != nil {
		return nil, nil, fmt.Errorf("bot: list runs of %s: %w", key, err)
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		if r.Undone || !(r.Status.Final() || r.Status == RunWaiting) {
			continue
		}
		entries, err := b.store.RunAudit(ctx, r.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("bot: read journal of %s: %w", r.ID, err)
		}
		if len(entries) > 0 {
			return r, entries, nil
		}
	}
	return nil, nil, nil
}

// runCreated is when a run started; zero when it is gone.
func (b *Bot) runCreated(ctx context.Context, id string) time.Time {
	r, err := b.store.Run(ctx, id)
	if err != nil {
		return time.Time{}
	}
	return r.Created
}

// undoButtonPrefix starts the data of an Undo button: "u:<run id>".
const undoButtonPrefix = "u:"

// withUndo adds the Undo button to a run's last message when the run
// changed something that can be undone (undoable).
func withUndo(m Outgoing, r *Run, tr *agent.Transcript) Outgoing {
	if tr == nil || !undoable(tr.Journal) {
		return m
	}
	m.Buttons = append(m.Buttons, Button{Label: "↩️ Undo", Data: undoButtonPrefix + r.ID, Command: "undo"})
	return m
}

// undoable reports whether a run's journal holds a change Undo can
// revert (a deleted task cannot be): the runs that get an Undo, under
// their message and on the Home (lastFilings).
func undoable(journal []agent.Applied) bool {
	return slices.ContainsFunc(journal, func(a agent.Applied) bool { return len(a.Inverse) > 0 })
}

// appliedOf is a run's stored journal as the agent's Undo takes it.
func appliedOf(entries []AuditEntry) []agent.Applied {
	journal := make([]agent.Applied, len(entries))
	for i, e := range entries {
		journal[i] = agent.Applied{Write: e.Write, Inverse: e.Inverse, Summary: e.Summary}
	}
	return journal
}

// undoButton reads an Undo button's run id: the chat's, or the same
// behind HomePrefix (an autopilot filing's on the Home).
func undoButton(data string) (runID string, ok bool) {
	runID, ok = strings.CutPrefix(strings.TrimPrefix(data, HomePrefix), undoButtonPrefix)
	return runID, ok && runID != ""
}

// pressedRun reads the run a button names, for the person who pressed
// it. When the run is gone or is not theirs it answers the press (with
// notYours in the second case) and returns nil; an error reading it is
// returned, so that the platform delivers the press again.
func (b *Bot) pressedRun(ctx context.Context, in Incoming, runID, notYours string) (*Run, error) {
	r, err := b.store.Run(ctx, runID)
	switch {
	case errors.Is(err, ErrNotFound):
		b.answerButtonLater(ctx, in, "That run is no longer kept.")
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("bot: read run %s: %w", runID, err)
	case r.UserID != in.UserID:
		b.answerButtonLater(ctx, in, notYours)
		return nil, nil
	}
	return r, nil
}

// pressUndo handles the Undo button: only the person who asked the run
// may press it; the press is answered, and the undo goes through the
// conversation's queue like /undo.
func (b *Bot) pressUndo(ctx context.Context, in Incoming, runID string) error {
	r, err := b.pressedRun(ctx, in, runID, "Only the person who asked can undo this.")
	if r == nil || err != nil {
		return err
	}
	if r.Undone {
		b.answerButtonLater(ctx, in, "Already undone.")
		return nil
	}
	b.answerButtonLater(ctx, in, "Undoing…")
	in = into(in, r)
	in.Command = "undo"
	return b.enqueue(ctx, in)
}

// dropUndoButton takes the Undo button off the pressed message, so it
// gives way to what it did.
func (b *Bot) dropUndoButton(ctx context.Context, in Incoming, r *Run) {
	if in.MessageID == "" {
		return
	}
	p, err := b.platform(r.Platform)
	if err != nil {
		return
	}
	if ed, ok := p.(Editor); ok {
		if err := ed.Edit(ctx, in.MessageID, r.outgoing(r.Answer+"\n→ ↩️ Undone")); err != nil {
			b.log.Warn("drop undo button", slog.Any("err", err))
		}
	}
}
