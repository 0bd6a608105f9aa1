package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// Autopilot (issue 27, issue 34): with PersonSettings.Autopilot on, a
// task that lands in the person's Todoist inbox is filed without being
// asked.
//
// A look (Autopilot) reads the inbox without a model call (InboxReader:
// an incremental /sync), compares it with the tasks autopilot has seen,
// and when some are new queues one durable job in the person's
// conversation (PersonSettings.Conversation). The job (autopilotRun,
// autopilot_run.go) runs the agent once for the batch, within
// AutopilotInput's limits, and posts one message written from the run's
// journal. Looks come from the person's autopilot timer and, in team
// mode, from a Todoist webhook (autopilot_trigger.go).
//
// Each person's autopilot is in one of five states (autopilotPhase),
// decided afresh at every look from the settings, the stored
// autopilotState, the person's conversation and their budgets:
//
//   - off: the setting is off, or the person is not (or no longer) in
//     TIDYBOT_ALLOWED_USERS. Nothing is read, nothing is filed; the
//     state is deleted when the setting is switched off.
//   - first look: on, but the inbox has not been noted since the switch
//     was turned on. The look notes every task in the inbox as seen and
//     files nothing: tasks there at switch-on stay put. It happens at
//     the switch itself (armAutopilot), so a task added a moment later
//     is new; when it cannot read Todoist then, the timer's next look
//     does it.
//   - watching: on and noted. A look queues a run for the tasks it has
//     not seen and adds them to the seen set (filed or left, they are
//     not new again: a task the person put back with Undo stays put).
//   - waiting for a question: a run in the person's conversation waits
//     for their answer (a question, a yes). New tasks are not queued
//     (they stay unseen) until it is answered or stopped, and a
//     queued batch that finds a waiting run gives its tasks back as
//     unseen: autopilot never writes beside a run the person is asked
//     about, so /undo always means that run.
//   - paused by the cap: the person's hourly autopilot budget (runs,
//     Config.AutopilotPerHour, and tokens, Config.AutopilotTokensPerHour)
//     or their daily token cap is spent. New tasks stay unseen and are
//     queued at the first look after the budget frees.
//
// Transitions: off → first look when the setting is turned on (the seen
// set starts again from nothing); first look → watching by the first
// look; watching ⇄ waiting for a question and watching ⇄ paused by the
// cap as runs wait and budgets fill and free; any → off when the setting
// is turned off or the person is removed from the allowed users.
//
// The seen set is kept exactly: the inbox at switch-on plus every task
// a look queued, never trimmed (Todoist never reuses an id; it grows by
// the tasks filed and starts again at the next switch-on).

// JobAutopilot files the new inbox tasks Job.Incoming.Text lists (ids
// separated by spaces) for Job.Incoming's person.
const JobAutopilot = "autopilot"

// InboxReader reads a person's Todoist inbox without a model call;
// *agent.Engine implements it. The autopilot needs it of the Agent.
type InboxReader interface {
	// Inbox returns the open tasks in the inbox.
	Inbox(ctx context.Context) ([]agent.Task, error)
}

var _ InboxReader = (*agent.Engine)(nil)

// DefaultAutopilotPerHour is Config.AutopilotPerHour's default.
const DefaultAutopilotPerHour = 12

// DefaultAutopilotTokensPerHour is Config.AutopilotTokensPerHour's
// default: many typical batches an hour (docs/performance.md#autopilot
// measures one), far below what AutopilotPerHour runs of a large inbox
// could spend.
const DefaultAutopilotTokensPerHour = 100_000

// autopilotPrefix starts the key of the setting holding a person's
// autopilot state (autopilotState as JSON).
const autopilotPrefix = "autopilot:"

// autopilotPhase is a state of a person's autopilot (see the top of
// this file).
type autopilotPhase int

const (
	phaseOff autopilotPhase = iota
	phaseFirstLook
	phaseWatching
	phaseQuestion
	phasePaused
)

func (p autopilotPhase) String() string {
	return [...]string{"off", "first look", "watching", "waiting for a question", "paused by the cap"}[p]
}

// autopilotState is what the autopilot keeps per person.
type autopilotState struct {
	// Looked is set by the first look after the switch-on.
	Looked bool `json:"looked,omitempty"`
	// Since is when the first look noted the inbox: a batch queued
	// before it belongs to an earlier switch-on and is dropped.
	Since time.Time `json:"since,omitzero"`
	// Seen are the inbox task ids looked at, in the order seen: those
	// there at the first look and every one a look queued since. Never
	// trimmed.
	Seen []string `json:"seen"`
	// Batches are the runs queued within the last hour, for the hourly
	// budget.
	Batches []autopilotBatch `json:"batches,omitempty"`
}

// autopilotBatch is one queued autopilot run: its id (the run's) and
// when it was queued.
type autopilotBatch struct {
	ID string    `json:"id"`
	At time.Time `json:"at"`
}

// autopilotLocks serialises the looks at one person's inbox (a webhook
// and the periodic trigger may ask at once). It is per process: two
// replicas looking at once may queue the same task twice; the second
// run finds it gone from the inbox and files nothing.
type autopilotLocks struct {
	// mu protects the fields below.
	mu     sync.Mutex
	people map[string]*sync.Mutex
	// nobody holds when a Todoist user id last matched nobody (see
	// AutopilotWebhook).
	nobody map[string]time.Time
}

// unmatched reports whether a Todoist user id matched nobody within
// unmatchedFor of now.
func (l *autopilotLocks) unmatched(id string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.nobody[id]
	return ok && now.Sub(at) < unmatchedFor
}

func (l *autopilotLocks) noMatch(id string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.nobody == nil {
		l.nobody = map[string]time.Time{}
	}
	l.nobody[id] = now
}

func (l *autopilotLocks) of(key string) *sync.Mutex {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.people == nil {
		l.people = map[string]*sync.Mutex{}
	}
	m := l.people[key]
	if m == nil {
		m = &sync.Mutex{}
		l.people[key] = m
	}
	return m
}

func (b *Bot) autopilotState(ctx context.Context, platform, userID string) (autopilotState, error) {
	var st autopilotState
	raw, err := b.store.Setting(ctx, autopilotPrefix+PersonID(platform, userID))
	if errors.Is(err, ErrNotFound) || (err == nil && raw == "") {
		return st, nil
	}
	if err != nil {
		return st, fmt.Errorf("bot: read autopilot state of %s:%s: %w", platform, userID, err)
	}
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		return st, fmt.Errorf("bot: decode autopilot state of %s:%s: %w", platform, userID, err)
	}
	if st.Seen != nil {
		st.Looked = true // a state written before Looked: non-nil Seen meant noted
	}
	return st, nil
}

func (b *Bot) saveAutopilotState(ctx context.Context, platform, userID string, st autopilotState) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("bot: encode autopilot state: %w", err)
	}
	if err := b.store.SetSetting(ctx, autopilotPrefix+PersonID(platform, userID), string(raw)); err != nil {
		return fmt.Errorf("bot: save autopilot state of %s:%s: %w", platform, userID, err)
	}
	return nil
}

// forgetAutopilot deletes a person's autopilot state (off: the next
// switch-on starts with a first look).
func (b *Bot) forgetAutopilot(ctx context.Context, platform, userID string) error {
	lock := b.autopilotLocks.of(PersonID(platform, userID))
	lock.Lock()
	defer lock.Unlock()
	raw, err := b.store.Setting(ctx, autopilotPrefix+PersonID(platform, userID))
	if errors.Is(err, ErrNotFound) || (err == nil && raw == "") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bot: read autopilot state of %s:%s: %w", platform, userID, err)
	}
	if err := b.store.SetSetting(ctx, autopilotPrefix+PersonID(platform, userID), ""); err != nil {
		return fmt.Errorf("bot: forget autopilot state of %s:%s: %w", platform, userID, err)
	}
	return nil
}

// Autopilot looks once at a person's inbox and acts as their
// autopilot's state says (see the top of this file): the first look
// notes the inbox; a watching look queues one run in their conversation
// for the new tasks; otherwise it leaves them for a later look. It
// makes no model call itself; it returns an error only when it could
// not look (the next look tries again).
func (b *Bot) Autopilot(ctx context.Context, platform, userID string) error {
	if b.isStopped() {
		return ErrStopped
	}
	lock := b.autopilotLocks.of(PersonID(platform, userID))
	lock.Lock()
	defer lock.Unlock()
	return b.look(ctx, platform, userID)
}

// look is Autopilot with the person's lock held.
func (b *Bot) look(ctx context.Context, platform, userID string) error {
	log := b.log.With(slog.String("platform", platform), slog.String("user_id", userID))
	ps, err := b.Settings(ctx, platform, userID)
	if err != nil {
		return err
	}
	if !ps.Autopilot || !b.servesPerson(platform, userID) {
		return nil // off
	}
	ag, err := b.agentFor(ctx, platform, userID)
	if errors.Is(err, ErrNotConnected) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bot: autopilot: the Todoist of %s:%s: %w", platform, userID, err)
	}
	ir, ok := ag.(InboxReader)
	if !ok {
		return fmt.Errorf("bot: autopilot: the agent of %s:%s cannot read the inbox", platform, userID)
	}
	inbox, err := ir.Inbox(ctx)
	if err != nil {
		return fmt.Errorf("bot: autopilot: %w", err)
	}
	st, err := b.autopilotState(ctx, platform, userID)
	if err != nil {
		return err
	}
	now := b.cfg.Now()
	if !st.Looked {
		// first look → watching: the inbox as it is stays put.
		st = autopilotState{Looked: true, Since: now, Seen: make([]string, 0, len(inbox))}
		for _, t := range inbox {
			st.Seen = append(st.Seen, t.ID)
		}
		log.Info("autopilot: first look; the inbox as it is stays put", slog.Int("inbox", len(inbox)))
		return b.saveAutopilotState(ctx, platform, userID, st)
	}
	seen := make(map[string]bool, len(st.Seen))
	for _, id := range st.Seen {
		seen[id] = true
	}
	var fresh []string
	for _, t := range inbox {
		if !seen[t.ID] {
			fresh = append(fresh, t.ID)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	if ps.Conversation == "" {
		log.Debug("autopilot is on but the person has no conversation to post in yet")
		return nil
	}
	th, err := b.store.Thread(ctx, ps.Conversation)
	if err != nil {
		return fmt.Errorf("bot: autopilot: read conversation %s: %w", ps.Conversation, err)
	}
	phase, err := b.busyPhase(ctx, platform, userID, th.Key, &st, now)
	if err != nil {
		return err
	}
	if phase != phaseWatching {
		log.Info("autopilot: the new tasks wait", slog.String("state", phase.String()), slog.Int("new_tasks", len(fresh)))
		return nil
	}
	dm := th.Key == th.Platform+":"+th.ChatID+":"+th.ThreadID
	j := Job{ID: newID(), ThreadKey: th.Key, Kind: JobAutopilot, Enqueued: now,
		Incoming: Incoming{Platform: th.Platform, ChatID: th.ChatID, ThreadID: th.ThreadID, UserID: userID, DM: dm, Text: strings.Join(fresh, " "), At: now}}
	// The job first: a crash before the state is saved queues the tasks
	// again, and the second run files only what is still in the inbox.
	if err := b.store.Commit(ctx, Change{Job: &j}); err != nil {
		return fmt.Errorf("bot: autopilot: queue a run for %s: %w", th.Key, err)
	}
	st.Seen = append(st.Seen, fresh...)
	st.Batches = append(st.Batches, autopilotBatch{ID: j.ID, At: now})
	if err := b.saveAutopilotState(ctx, platform, userID, st); err != nil {
		return err
	}
	log.Info("autopilot: new inbox tasks; run queued", slog.Int("new_tasks", len(fresh)), slog.String("job_id", j.ID))
	b.schedule(ctx, j)
	return nil
}

// busyPhase decides, for a look that found new tasks, whether autopilot
// is watching (it may queue them), waiting for a question in the
// conversation threadKey, or paused by the cap. It drops st's batches
// older than an hour.
func (b *Bot) busyPhase(ctx context.Context, platform, userID, threadKey string, st *autopilotState, now time.Time) (autopilotPhase, error) {
	if r, err := b.waitingRun(ctx, threadKey); err != nil {
		return phaseOff, err
	} else if r != nil {
		return phaseQuestion, nil
	}
	st.Batches = slices.DeleteFunc(st.Batches, func(r autopilotBatch) bool { return now.Sub(r.At) >= time.Hour })
	if len(st.Batches) >= b.cfg.AutopilotPerHour {
		return phasePaused, nil
	}
	spent, err := b.batchTokens(ctx, st.Batches)
	if err != nil {
		return phaseOff, err
	}
	if spent >= b.cfg.AutopilotTokensPerHour || b.overCap(ctx, platform, userID) {
		return phasePaused, nil
	}
	return phaseWatching, nil
}

// batchTokens are the model tokens the runs of batches used, as stored
// with each run (a batch not started yet counts nothing).
func (b *Bot) batchTokens(ctx context.Context, batches []autopilotBatch) (int, error) {
	n := 0
	for _, bt := range batches {
		r, err := b.store.Run(ctx, bt.ID)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("bot: autopilot: read run %s: %w", bt.ID, err)
		}
		n += r.Usage.Total()
	}
	return n, nil
}

// unsee gives a batch's tasks back as not seen (the batch jobID was not
// run), so that the next look queues them again; the batch no longer
// counts in the hourly budget.
func (b *Bot) unsee(ctx context.Context, platform, userID, jobID string, ids []string) error {
	lock := b.autopilotLocks.of(PersonID(platform, userID))
	lock.Lock()
	defer lock.Unlock()
	st, err := b.autopilotState(ctx, platform, userID)
	if err != nil || !st.Looked {
		return err
	}
	st.Seen = slices.DeleteFunc(st.Seen, func(id string) bool { return slices.Contains(ids, id) })
	st.Batches = slices.DeleteFunc(st.Batches, func(bt autopilotBatch) bool { return bt.ID == jobID })
	return b.saveAutopilotState(ctx, platform, userID, st)
}

// switchAutopilot follows the person's setting: turned off, it forgets
// the autopilot state (the next switch-on starts afresh); on and not yet
// noted (just turned on), it makes the first look at once. It reports
// whether autopilot is on and noted, so that its timer's next look is a
// watching one. A first look that fails is logged: the timer's first
// pass makes it.
func (b *Bot) switchAutopilot(ctx context.Context, platform, userID string, on bool) (noted bool, err error) {
	if !on {
		return false, b.forgetAutopilot(ctx, platform, userID)
	}
	st, err := b.autopilotState(ctx, platform, userID)
	if err != nil {
		return false, err
	}
	if st.Looked {
		return true, nil
	}
	if err := b.Autopilot(ctx, platform, userID); err != nil {
		b.log.Warn("autopilot: the first look at the switch failed; the timer makes it", slog.String("platform", platform), slog.String("user_id", userID), slog.Any("err", err))
		return false, nil
	}
	st, err = b.autopilotState(ctx, platform, userID)
	return st.Looked, err
}
