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

// Timer kinds of the morning digest: the daily one, and the one-off
// that "Snooze digest" sets.
const (
	TimerDigest       = "digest"
	TimerDigestSnooze = "digest-snooze"
)

// Digest buttons' data.
const (
	digestMove   = "dg:move"
	digestTidy   = "dg:tidy"
	digestSnooze = "dg:snooze"
)

const (
	// digestLate is how late a digest may still be sent (after
	// downtime); later, that day's is skipped, never sent in a burst.
	digestLate = 2 * time.Hour
	// snoozeFor is how long "Snooze digest" puts it off.
	snoozeFor = time.Hour
	// digestList is the most tasks a digest lists per heading.
	digestList = 10
)

// MoveOverdueInstruction is the run "Move overdue to today" starts.
const MoveOverdueInstruction = "Move every overdue task to today: give each task whose due date is before today the due date today, keeping its time of day. Leave recurring tasks as they are, and change nothing else."

// scheduleDigest sets the person's digest timer to the next time their
// digest is due, or deletes it when they want none.
func (b *Bot) scheduleDigest(ctx context.Context, platform, userID string, ps PersonSettings) error {
	key := PersonID(platform, userID)
	hm, ok := digestOn(ps)
	if !ok {
		return b.DeleteTimer(ctx, TimerDigest, key)
	}
	next := nextAt(b.cfg.Now(), hm, b.zone(ctx, platform, userID, ps))
	return b.SetTimer(ctx, Timer{Kind: TimerDigest, Key: key, Due: next})
}

// repairDigest sets the person's digest timer when they want a digest
// and it is gone; one that is there keeps its due time (a snooze, a
// retry).
func (b *Bot) repairDigest(ctx context.Context, platform, userID string, ps PersonSettings) error {
	if _, on := digestOn(ps); !on {
		return nil
	}
	ts, err := b.timers()
	if err != nil {
		return err
	}
	key := PersonID(platform, userID)
	_, err = ts.Timer(ctx, TimerDigest, key)
	if err == nil {
		return nil
	}
	if !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("bot: read the digest timer of %s: %w", key, err)
	}
	return b.scheduleDigest(ctx, platform, userID, ps)
}

// nextAt is the first time after now that the clock reads hm ("08:00")
// in loc.
func nextAt(now time.Time, hm string, loc *time.Location) time.Time {
	t := at(now.In(loc), hm, loc)
	if !t.After(now) {
		local := now.In(loc)
		t = at(time.Date(local.Year(), local.Month(), local.Day()+1, 12, 0, 0, 0, loc), hm, loc)
	}
	return t
}

// at is hm ("08:00") on day's date in loc.
func at(day time.Time, hm string, loc *time.Location) time.Time {
	var h, m int
	_, _ = fmt.Sscanf(hm, "%d:%d", &h, &m)
	d := day.In(loc)
	return time.Date(d.Year(), d.Month(), d.Day(), h, m, 0, 0, loc)
}

// registerDigest makes the bot send digests.
func (b *Bot) registerDigest() {
	b.HandleTimer(TimerDigest, b.digestTimer)
	b.HandleTimer(TimerDigestSnooze, b.digestTimer)
}

// digestTimer sends a person's digest when it is due and returns when
// the next is due. A digest more than digestLate late (the bot was
// down) is skipped; each person gets at most one a day (and one per
// snooze), also when several replicas share the store. A person no
// longer in the allowed users gets none.
func (b *Bot) digestTimer(ctx context.Context, t Timer) (time.Time, error) {
	platform, userID := personOf(t.Key)
	ps, err := b.Settings(ctx, platform, userID)
	if err != nil {
		return time.Time{}, err
	}
	hm, on := digestOn(ps)
	if !on {
		return time.Time{}, nil // turned off meanwhile: no timer
	}
	if !b.servesPerson(platform, userID) {
		// Removed from the allowed users: nobody else is served, nor
		// shown the account's tasks. No timer; repairTimers sets it
		// again at a start that allows them.
		b.log.Info("digest stopped: the person is no longer allowed", slog.String("platform", platform), slog.String("user_id", userID))
		return time.Time{}, nil
	}
	loc := b.zone(ctx, platform, userID, ps)
	now := b.cfg.Now()
	var next time.Time // a snoozed digest is sent once
	scheduled := t.Due
	if t.Kind == TimerDigest {
		next = nextAt(now, hm, loc)
		// A retry after a failure is due later than the digest was.
		scheduled = at(t.Due, hm, loc)
		if scheduled.After(t.Due) {
			scheduled = t.Due
		}
	}
	log := b.log.With(slog.String("platform", platform), slog.String("user_id", userID))
	if late := now.Sub(scheduled); late > digestLate {
		log.Info("digest skipped: too late after downtime", slog.Duration("late", late))
		return next, nil
	}
	dest, ok := conversationOf(ps.Conversation)
	if !ok || dest.Platform != platform {
		log.Info("digest not sent: no private conversation with the person yet")
		return next, nil
	}
	if b.queue(platform) == nil {
		// This process does not post there (tidybot chat on a shared
		// database): it leaves the day's digest to one that does.
		return now.Add(timerRetry), nil
	}
	ag, err := b.agentFor(ctx, platform, userID)
	if errors.Is(err, ErrNotConnected) {
		return next, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	r, ok := ag.(Reader)
	if !ok {
		return next, nil
	}
	snap, err := r.Snapshot(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("bot: read Todoist for the digest: %w", err)
	}
	d := makeDigest(snap, now.In(loc))
	if d.empty() {
		log.Info("digest: nothing to say today")
		return next, nil
	}
	m := Outgoing{ChatID: dest.ChatID, ThreadID: dest.ThreadID, Text: d.text(), Buttons: d.buttons()}
	ob := b.outbound(platform, m)
	// One a day per person, and one per snooze (the key is unique in
	// the store): a restart or another replica finds it sent. Each
	// snooze sets its timer due at its own time.
	key := "digest:" + t.Key + ":" + scheduled.In(loc).Format(time.DateOnly)
	if t.Kind == TimerDigestSnooze {
		key += ":snoozed:" + t.Due.UTC().Format(time.RFC3339Nano)
	}
	err = b.store.Commit(ctx, Change{EventKey: key, EventAt: now, Send: []Outbound{ob}})
	if errors.Is(err, ErrDuplicate) {
		return next, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("bot: queue digest: %w", err)
	}
	b.deliver(ctx, ob)
	log.Info("digest sent", slog.Int("due_today", len(d.today)), slog.Int("overdue", len(d.overdue)), slog.Int("inbox", d.inbox))
	return next, nil
}

// conversationOf reads a thread key of a private conversation
// ("platform:chat:thread") as where to post.
func conversationOf(key string) (Incoming, bool) {
	parts := strings.SplitN(key, ":", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return Incoming{}, false
	}
	return Incoming{Platform: parts[0], ChatID: parts[1], ThreadID: parts[2], DM: true}, true
}

// digest is what a morning digest says.
type digest struct {
	day            time.Time
	today, overdue []agent.Task
	inbox          int
}

// makeDigest reads snap on the local day of now.
func makeDigest(snap agent.Snapshot, now time.Time) digest {
	d := digest{day: now}
	today := now.Format(time.DateOnly)
	inbox := snap.InboxID()
	for _, t := range snap.Tasks {
		if inbox != "" && t.ProjectID == inbox {
			d.inbox++
		}
		if t.ParentID != "" {
			continue // its parent stands for it
		}
		switch day := localDay(t, now.Location()); {
		case day == "":
		case day == today:
			d.today = append(d.today, t)
		case day < today:
			d.overdue = append(d.overdue, t)
		}
	}
	slices.SortStableFunc(d.overdue, func(a, b agent.Task) int {
		return strings.Compare(localDay(a, now.Location()), localDay(b, now.Location()))
	})
	return d
}

// localDay is the date (YYYY-MM-DD) a task is due on in loc: a date
// fixed in time (with a zone, "…Z") is moved into loc; a full-day or
// floating date is the person's own.
func localDay(t agent.Task, loc *time.Location) string {
	if t.DueDate == "" {
		return ""
	}
	if strings.HasSuffix(t.DueDate, "Z") {
		if at, err := time.Parse(time.RFC3339, t.DueDate); err == nil {
			return at.In(loc).Format(time.DateOnly)
		}
	}
	if len(t.DueDate) >= 10 {
		return t.DueDate[:10]
	}
	return ""
}

func (d digest) empty() bool { return len(d.today) == 0 && len(d.overdue) == 0 && d.inbox == 0 }

func (d digest) text() string {
	var sb strings.Builder
	sb.WriteString("☀️ Good morning! " + d.day.Format("Monday 2 January") + "\n")
	list := func(title string, ts []agent.Task, since bool) {
		if len(ts) == 0 {
			return
		}
		fmt.Fprintf(&sb, "\n%s (%d):\n", title, len(ts))
		for i, t := range ts {
			if i == digestList {
				fmt.Fprintf(&sb, "…and %d more\n", len(ts)-i)
				break
			}
			line := "• " + t.Content
			if since {
				if day, err := time.Parse(time.DateOnly, localDay(t, d.day.Location())); err == nil {
					line += " (due " + day.Format("2 Jan") + ")"
				}
			}
			sb.WriteString(line + "\n")
		}
	}
	list("Due today", d.today, false)
	list("Overdue", d.overdue, true)
	if d.inbox > 0 {
		fmt.Fprintf(&sb, "\nInbox: %s waiting to be filed.\n", plural(d.inbox, "task"))
	}
	return strings.TrimRight(sb.String(), "\n")
}

func (d digest) buttons() []Button {
	var bs []Button
	if len(d.overdue) > 0 {
		bs = append(bs, Button{Label: "Move overdue to today", Data: digestMove})
	}
	if d.inbox > 0 {
		bs = append(bs, Button{Label: "Tidy inbox", Data: digestTidy, Command: "tidy-inbox"})
	}
	return append(bs, Button{Label: "Snooze digest", Data: digestSnooze})
}

// pressDigest handles a digest's buttons, in the presser's private
// conversation: moving the overdue tasks and tidying the inbox are runs
// (with Undo), snoozing sets a one-off timer.
func (b *Bot) pressDigest(ctx context.Context, in Incoming) error {
	ps, err := b.Settings(ctx, in.Platform, in.UserID)
	if err != nil {
		return err
	}
	if dest, ok := conversationOf(ps.Conversation); ok && dest.Platform == in.Platform {
		in.ChatID, in.ThreadID, in.DM = dest.ChatID, dest.ThreadID, true
	}
	switch in.Button {
	case digestMove:
		b.answerButtonLater(ctx, in, "Moving the overdue tasks…")
		in.Button, in.Text = "", MoveOverdueInstruction
		return b.enqueue(ctx, in)
	case digestTidy:
		b.answerButtonLater(ctx, in, "Tidying the inbox…")
		in.Button, in.Command, in.Text = "", "tidy-inbox", ""
		return b.enqueue(ctx, in)
	case digestSnooze:
		if dup, err := b.seen(ctx, in); err != nil || dup {
			return err
		}
		due := b.cfg.Now().Add(snoozeFor)
		if err := b.SetTimer(ctx, Timer{Kind: TimerDigestSnooze, Key: PersonID(in.Platform, in.UserID), Due: due}); err != nil {
			return err
		}
		text := "I'll send the digest again in an hour."
		b.answerButtonLater(ctx, in, text)
		b.replyLater(ctx, in.Platform, reply(in, text))
		return nil
	}
	b.answerButtonLater(ctx, in, "I don't know that button.")
	return nil
}
