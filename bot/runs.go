package bot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// startRun begins a new run for a message or command; a run of the
// thread waiting for an answer is dropped.
func (b *Bot) startRun(ctx context.Context, runID string, in Incoming, instruction string) error {
	return b.beginRun(ctx, runID, in, instruction, nil)
}

// beginRun is startRun with st, what the handling of its job (runID)
// read as it began (readStart): st.Waiting, the run of the thread that
// waited then, is dropped, and no other can start waiting since (the
// thread runs one job at a time, and the end of the one before was
// committed before this job's turn). With st nil it reads them itself.
func (b *Bot) beginRun(ctx context.Context, runID string, in Incoming, instruction string, st *StartReads) error {
	if st == nil {
		read, err := b.readStart(ctx, runID, in)
		if err != nil {
			return err
		}
		st = &read
	}
	if st.Stored {
		return nil // started before a restart; it resumes from its own record
	}
	key := in.ThreadKey()
	var images []agent.Image
	if a := in.Attachment; a != nil && a.Kind == AttachImage {
		im, err := b.photo(ctx, in)
		if im == nil {
			return err // the user was told why
		}
		images = append(images, *im)
	}
	if st.Waiting != nil {
		if err := b.drop(ctx, st.Waiting, "a new request came in"); err != nil {
			return err
		}
	}
	history, err := b.history(in, st)
	if err != nil {
		return err
	}
	if err := b.rememberThread(ctx, in); err != nil {
		return err
	}
	// Only the settings: a run's start reads no timer (repairTimers).
	ps, err := decodeSettings(in.Platform, in.UserID, st.Setting)
	if err != nil {
		return err
	}
	if b.overCap(ctx, in.Platform, in.UserID) {
		b.send(ctx, in.Platform, reply(in, b.capMessage()))
		return nil
	}
	ag, err := b.agentFor(ctx, in.Platform, in.UserID)
	if errors.Is(err, ErrNotConnected) {
		// Disconnected since the message came in.
		b.keepPending(ctx, in)
		b.promptConnect(ctx, in, "")
		return nil
	}
	if err != nil {
		return fmt.Errorf("bot: the Todoist of %s:%s: %w", in.Platform, in.UserID, err)
	}
	now := b.cfg.Now()
	r := &Run{ID: runID, ThreadKey: key, Platform: in.Platform, ChatID: in.ChatID, ThreadID: in.ThreadID, UserID: in.UserID, TeamID: in.TeamID, EventID: in.EventID,
		Status: RunWorking, Instruction: instruction, Created: now, Updated: now, DM: in.DM}
	if len(images) > 0 {
		r.Photo = in.Attachment
	}
	b.log.Info("run started", slog.String("run_id", r.ID), slog.String("thread_key", key))
	if b.notice(key) {
		b.send(ctx, in.Platform, reply(in, b.cfg.Notice))
	}
	// The run is stored at its first save (before its first write, or
	// when it ends or waits), which retires its job in the same
	// transaction: until then the job is the durable record, and a crash
	// starts the run again from it, having written nothing to Todoist. A
	// run that answers at once costs one transaction, not two.
	// Its message was acknowledged at intake, where the platform can:
	// the status message then waits for something to say (see ack).
	q := b.queue(in.Platform)
	quiet := q != nil && acknowledges(q.p, in)
	return b.executeMarked(ctx, r, runID, st.CancelMark, "🤔 Working on it…", quiet, func(ctx context.Context, h agent.Hooks) agent.Outcome {
		// /tidy-inbox certainly reads the inbox and the projects: they are
		// read before the first model call.
		out := ag.Start(ctx, agent.Input{Instruction: instruction, History: history, Images: images, Overview: instruction == TidyInboxInstruction,
			Confirm: agent.ConfirmPolicy(ps.Confirm), Language: ps.Language, TimeZone: ps.TimeZone, Model: b.tierModel(ps)}, h)
		if len(images) > 0 && agent.ErrorCodeOf(out.Err) == agent.ErrUnsupported {
			// The model takes no images: say so plainly, and on auto
			// stop sending them.
			b.noVision.Store(true)
			b.log.Warn("the model rejected an image", slog.String("run_id", r.ID), slog.Any("err", out.Err))
			out.Answer = noVisionText
		}
		return out
	})
}

// outgoing is a message of r to its person in its chat.
func (r *Run) outgoing(text string) Outgoing {
	return Outgoing{ChatID: r.ChatID, ThreadID: r.ThreadID, UserID: r.UserID, TeamID: r.TeamID, RunID: r.ID, EventID: r.EventID, Text: text}
}

// history returns the earlier messages of in's thread the model sees
// (Config.History of them, since the thread's last /reset: st's), without in.
func (b *Bot) history(in Incoming, st *StartReads) ([]agent.HistoryMessage, error) {
	if st.Thread == nil {
		return nil, fmt.Errorf("bot: read thread %s: %w", in.ThreadKey(), ErrNotFound)
	}
	msgs := st.Messages
	var history []agent.HistoryMessage
	for _, m := range msgs {
		if m.Role == RoleUser && m.Text == in.Text && m.At.Equal(in.At) {
			continue // the message being answered
		}
		history = append(history, agent.HistoryMessage{Role: agent.Role(m.Role), Text: m.Text})
	}
	if len(history) > b.cfg.History {
		history = history[len(history)-b.cfg.History:]
	}
	return history, nil
}

// rememberThread records, for a message in a shared chat's thread, the
// person's latest thread there (for a slash command without one) and
// that the bot is part of the thread (KnowsThread).
func (b *Bot) rememberThread(ctx context.Context, in Incoming) error {
	if in.DM || in.ThreadID == "" {
		return nil
	}
	key := in.ThreadKey()
	if err := b.store.SetSetting(ctx, latestThreadSetting(in), in.ThreadID); err != nil {
		return fmt.Errorf("bot: remember latest thread of %s: %w", key, err)
	}
	if err := b.store.SetSetting(ctx, knownThreadSetting(in), in.At.UTC().Format(time.RFC3339)); err != nil {
		return fmt.Errorf("bot: remember thread %s: %w", key, err)
	}
	return nil
}

// notice reports whether Config.Notice is yet to be said in thread key,
// and marks it said.
func (b *Bot) notice(key string) bool {
	if b.cfg.Notice == "" {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.noticed == nil {
		b.noticed = map[string]bool{}
	}
	if b.noticed[key] {
		return false
	}
	b.noticed[key] = true
	return true
}

// resumeRun continues a run: with the user's answer (from job jobID), or
// after a restart (answer and jobID empty).
func (b *Bot) resumeRun(ctx context.Context, runID, answer, jobID string) error {
	r, err := b.store.Run(ctx, runID)
	if err != nil {
		return fmt.Errorf("bot: read run %s: %w", runID, err)
	}
	if r.Status.Final() {
		return nil
	}
	if answer == "" {
		// A restart: an answer that resumed the run before it is given
		// again (the agent ignores it once its transcript holds it).
		answer = r.Reply
	}
	// The run acts on the account of the person who asked, whoever
	// answers or whatever restarted it.
	ag, err := b.agentFor(ctx, r.Platform, r.UserID)
	if errors.Is(err, ErrNotConnected) {
		r.Status, r.Waiting, r.Updated = RunCancelled, nil, b.cfg.Now()
		if err := b.commit(ctx, Change{Run: r, DeleteJob: jobID}); err != nil {
			return fmt.Errorf("bot: save run %s: %w", r.ID, err)
		}
		b.rejected(ctx, r)
		return nil
	}
	if err != nil {
		return fmt.Errorf("bot: the Todoist of %s:%s: %w", r.Platform, r.UserID, err)
	}
	first := "🔁 Picking up where I left off…"
	if answer != "" {
		first = "🤔 Working on it…"
	}
	if r.Autopilot {
		first = "" // autopilot posts only its answer
		if len(r.Transcript) == 0 {
			return b.dropAutopilot(ctx, r)
		}
	}
	if len(r.Transcript) == 0 {
		// Stopped before its first step was saved: start it again.
		var images []agent.Image
		if r.Photo != nil {
			im, err := b.photo(ctx, Incoming{Platform: r.Platform, ChatID: r.ChatID, ThreadID: r.ThreadID, UserID: r.UserID, Attachment: r.Photo})
			if err != nil {
				return err
			}
			if im == nil { // the user was told why
				r.Status, r.Answer, r.Updated = RunFailed, "I couldn't fetch the photo again after a restart.", b.cfg.Now()
				return b.store.SaveRun(ctx, r)
			}
			images = append(images, *im)
		}
		ps, err := b.Settings(ctx, r.Platform, r.UserID)
		if err != nil {
			return err
		}
		return b.execute(ctx, r, "", first, false, func(ctx context.Context, h agent.Hooks) agent.Outcome {
			return ag.Start(ctx, agent.Input{Instruction: r.Instruction, Images: images,
				Confirm: agent.ConfirmPolicy(ps.Confirm), Language: ps.Language, TimeZone: ps.TimeZone, Model: b.tierModel(ps)}, h)
		})
	}
	tr, err := agent.UnmarshalTranscript(r.Transcript)
	if errors.Is(err, agent.ErrTranscriptNewer) {
		// A newer replica saved it (a rolling upgrade): the run and the
		// job that resumed it stay stored as they are, for a replica
		// that reads it (this process's next start, once upgraded);
		// nothing is posted.
		b.log.Warn("run saved by a newer version: left for a replica that reads it", slog.String("run_id", r.ID), slog.Any("err", err))
		if t := turnOf(ctx); t != nil {
			t.fail()
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("bot: run %s: %w", r.ID, err)
	}
	// The answer is saved with the run and its job retired in one
	// transaction: a crash now resumes this run with the answer, and
	// never starts a second run whose instruction is the answer.
	if r.Status == RunWaiting {
		answer = withEarly(r, answer)
	}
	r.Status, r.Waiting, r.Reply, r.Early = RunWorking, nil, answer, nil
	if err := b.commit(ctx, Change{Run: r, DeleteJob: jobID}); err != nil {
		return fmt.Errorf("bot: save run %s: %w", r.ID, err)
	}
	return b.execute(ctx, r, "", first, false, func(ctx context.Context, h agent.Hooks) agent.Outcome {
		out := ag.Resume(ctx, tr, answer, h)
		if r.Autopilot {
			out.Answer = autopilotAnswer(touched(tr), out)
		}
		return out
	})
}

// execute runs the agent for r with progress notes, then reports the
// outcome. jobID, when set, is the job of a run not stored yet: the run's
// first save stores it and retires the job in one transaction. first is
// the status message ("" for none); quiet holds it back until the run
// has something to say (see ack).
func (b *Bot) execute(ctx context.Context, r *Run, jobID, first string, quiet bool, call func(context.Context, agent.Hooks) agent.Outcome) error {
	mark, err := b.cancelMark(ctx, r.ThreadKey, jobID, r.ID)
	if err != nil {
		return err
	}
	return b.executeMarked(ctx, r, jobID, mark, first, quiet, call)
}

// executeMarked is execute with mark, the run's cancel mark read as it
// began (see cancelMark).
func (b *Bot) executeMarked(ctx context.Context, r *Run, jobID string, mark int64, first string, quiet bool, call func(context.Context, agent.Hooks) agent.Outcome) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The run's model calls are reserved against its person's day.
	meter := &runMeter{b: b, platform: r.Platform, userID: r.UserID, stop: cancel}
	runCtx = context.WithValue(runCtx, meterKey{}, meter)
	ar := &activeRun{runID: r.ID, cancel: cancel, cancelMark: mark}
	b.mu.Lock()
	b.running[r.ThreadKey] = ar
	switch {
	case b.stopped:
		// Stop has cancelled the runs it saw; this one started since.
		cancel(ErrStopped)
	case b.feed != nil && b.sched.stale(r.ThreadKey):
		// So has the loss of the leases (feeder.lost).
		cancel(errLeasesLost)
	}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		// The thread's next run may have started (this run's end is
		// committed in the background): only this run's entry goes.
		if b.running[r.ThreadKey] == ar {
			delete(b.running, r.ThreadKey)
		}
		b.mu.Unlock()
	}()

	q := b.queue(r.Platform)
	if q == nil {
		return fmt.Errorf("bot: no platform %q", r.Platform)
	}
	// before is the run's usage as this execution began; counted, as
	// counted in its person's day in the store: every save of the run
	// counts its tokens since the last, in the same transaction, so that
	// a crash forgets none and counts none twice.
	before := r.Usage
	e := &runEnd{r: r, jobID: jobID, unstored: jobID != "", counted: r.Usage, meter: meter, log: b.log.With(slog.String("run_id", r.ID))}
	// What a dead process's preview of this run left goes first, ahead
	// of this execution's status message (orphan.go).
	b.dropOrphan(ctx, q, r.ID, r.ChatID, r.ThreadID)
	prog := newProgress(q, r, b.log)
	prog.quiet = quiet
	prog.sign = b.signShown(r.ChatID, r.ThreadID)
	if first != "" { // "": no status message (autopilot posts only its answer)
		prog.start(ctx, first)
	}
	hooks := agent.Hooks{
		Save: func(ctx context.Context, tr *agent.Transcript) error {
			return b.saveStep(ctx, e, prog, tr, cancel)
		},
		Observe: prog.add,
	}
	pv := newPreview(b, q, r, prog.messageID)
	if pv != nil {
		hooks.Answer = pv.hear
	}
	out := call(runCtx, hooks)
	// Once the leases were lost, the run's conversation may be another
	// process's, which resumes it from its last saved step: an answer
	// that came anyway is not posted, the run ends as interrupted.
	lost := b.feed != nil && b.sched.stale(r.ThreadKey)
	if lost && out.Status != agent.StatusInterrupted {
		out = agent.Outcome{Status: agent.StatusInterrupted, Err: errLeasesLost}
	}
	// A run that failed because a save failed (a database out of reach
	// for a moment, with a Shared store) is interrupted instead, and
	// resumes from its last save wherever its conversation is leased
	// next (here at once), up to jobTries times: its writes were saved
	// pending before they were sent, so none is made twice.
	if !lost && e.saveErr != nil && out.Status == agent.StatusFailed &&
		b.triedAgain("run:"+r.ID, "a save of the run failed; it is interrupted and resumes from its last save", e.saveErr, e.log) {
		out = agent.Outcome{Status: agent.StatusInterrupted, Err: e.saveErr}
	} else {
		// This execution is not tried again for a failed save: the
		// count of its earlier tries goes, or a later failure of the
		// run would start from it (and the map would keep it).
		b.forgetTries("run:" + r.ID)
	}
	if pv != nil {
		pv.end()
		e.preview = pv
	}
	prog.stop(ctx)
	prog.settle(out.Status)
	r.Notes = prog.notes()
	b.mu.Lock()
	cancelled := ar.cancelled
	b.mu.Unlock()
	if cancelled && !lost && errors.Is(out.Err, ErrCancelStored) {
		// The save a /cancel stored elsewhere refused ended the run
		// (the engine ends a run whose save failed as failed): it
		// stopped as asked.
		out.Status = agent.StatusInterrupted
	}
	switch {
	case lost: // interrupted, not stopped: it goes on where it is leased
	case cancelled:
		e.stopped = "Stopped, as you asked."
	case errors.Is(context.Cause(runCtx), errDailyCap):
		e.stopped = b.capMessage()
	}
	e.reconnect = !lost && b.cfg.Accounts != nil && rejectedToken(out)
	if e.reconnect {
		out.Answer = "I stopped: Todoist no longer accepts my connection to your account (it was revoked or expired). I kept your request; it runs again once you reconnect.\n" + b.doneList(r.Platform, out.Transcript)
	}
	err := b.finish(ctx, e, out)
	b.cfg.Metrics.RunEnded(r.Status, agent.Usage{
		PromptTokens:     r.Usage.PromptTokens - before.PromptTokens,
		CompletionTokens: r.Usage.CompletionTokens - before.CompletionTokens,
		Calls:            r.Usage.Calls - before.Calls,
	})
	return err
}

// runEnd is what the saves of one execution of a run share, up to the
// save of its end.
type runEnd struct {
	r *Run
	// jobID, when set, is the job of a run not stored yet: the run's
	// first save retires it.
	jobID string
	// unstored is set when the run was not stored as this execution
	// began (jobID was set): it has no journal yet.
	unstored bool
	// counted is the run's usage as counted in its person's day in the
	// store: every save counts the tokens since the last, in the same
	// transaction, so that a crash forgets none and counts none twice.
	counted agent.Usage
	meter   *runMeter
	log     *slog.Logger // with the run's id
	// saveErr is why the last save of a step failed, if it did (not
	// fenced).
	saveErr error

	// Set when the run has ended. stopped, when set, says why the bot
	// stopped the run (/cancel, the daily cap); reconnect asks the person
	// to connect Todoist again after the answer (see rejected).
	stopped   string
	reconnect bool
	// preview streamed the answer (see Streamer), nil if none: its
	// stream, if it opened one, is that preview.
	preview *preview
	// audit and count go into the transaction that saves the end: the
	// run's writes not journaled yet, its tokens not counted yet.
	audit []AuditEntry
	count map[string]int
}

// saveStep is the agent's Save hook: it stores the run as it stands
// after a step, with its tokens since the last save, and stops the run
// at its person's daily cap.
func (b *Bot) saveStep(ctx context.Context, e *runEnd, prog *progress, tr *agent.Transcript, cancel context.CancelCauseFunc) error {
	if settled(tr.Status) {
		// The run has ended or waits: finish saves this very
		// transcript with the run's state, its answer or
		// question and the outbox in one transaction, so a save
		// now would be a second transaction (and fsync) for the
		// same record. Every write was saved pending before it
		// was sent, so a crash in between loses none.
		return nil
	}
	// A /cancel stored through another replica stops the run here,
	// before its first save and its next write (drain sees ctx's end).
	saveCtx := b.checkCancels(ctx, e.r.ThreadKey)
	raw, err := agent.MarshalTranscript(tr)
	if err != nil {
		return err
	}
	r := e.r
	r.Transcript, r.Usage, r.Updated = raw, tr.Usage, b.cfg.Now()
	r.Notes = prog.notes()
	c := Change{Run: r, DeleteJob: e.jobID}
	spent := tr.Usage.Total() - e.counted.Total()
	if spent > 0 {
		c.Count = map[string]int{usageKey(r.Platform, r.UserID, b.cfg.Now()): spent}
	}
	if c.DeleteJob != "" || c.Count != nil {
		err = b.commit(saveCtx, c)
	} else {
		err = b.store.SaveRun(saveCtx, r)
	}
	if err != nil {
		if errors.Is(err, ErrFenced) {
			cancel(ErrFenced) // another process has the run now: stop at once
		} else {
			e.saveErr = err
		}
		if errors.Is(err, ErrCancelStored) && b.stopRun(r.ThreadKey) {
			b.log.Info("stopping a run: /cancel came through another replica", slog.String("thread_key", r.ThreadKey))
		}
		return err
	}
	e.jobID, e.counted = "", tr.Usage
	e.meter.counted(spent)
	if !e.meter.wasMetered() && b.overCap(ctx, r.Platform, r.UserID) {
		// A model that Metered does not wrap: stop after the
		// call that reached the cap.
		cancel(errDailyCap)
	}
	return nil
}

// settled reports whether a transcript's status is one that finish saves
// with the run's final state (interrupted is saved as it is).
func settled(st agent.Status) bool {
	switch st {
	case agent.StatusDone, agent.StatusFailed, agent.StatusStopped, agent.StatusAsking, agent.StatusConfirming:
		return true
	}
	return false
}

// finish tells the user how a run ended. The run's state, its answer or
// question (in the outbox), the journal of its writes, the tokens it
// spent since e.counted (to its person's day; e.meter hears of them) and
// the retirement of its job e.jobID (if the run was not stored yet) are
// saved in one transaction, and then the answer or question is posted:
// for a worker's job, in the background while the worker goes on (see
// handOff).
func (b *Bot) finish(ctx context.Context, e *runEnd, out agent.Outcome) error {
	r := e.r
	if out.Err != nil && out.Status != agent.StatusInterrupted {
		e.log.Error("run error", slog.Any("err", out.Err))
	}
	if err := b.endTranscript(context.WithoutCancel(ctx), e, out.Transcript); err != nil {
		b.afterEnd(ctx, e)
		return err
	}
	if spent := r.Usage.Total() - e.counted.Total(); spent > 0 {
		e.count = map[string]int{usageKey(r.Platform, r.UserID, b.cfg.Now()): spent}
		e.meter.counted(spent)
	}
	// A runaway answer or question is cut to what the platform shows.
	out.Answer, out.Question = b.fit(r.Platform, out.Answer), b.fit(r.Platform, out.Question)
	r.Updated = b.cfg.Now()
	switch out.Status {
	case agent.StatusDone, agent.StatusFailed, agent.StatusStopped:
		return b.endAnswered(ctx, e, out)
	case agent.StatusAsking, agent.StatusConfirming:
		return b.endAsking(ctx, e, out)
	case agent.StatusInterrupted:
		return b.endInterrupted(ctx, e, out)
	}
	return nil
}

// endTranscript puts the run's final transcript in e.r and the writes
// it has not journaled yet in e.audit.
func (b *Bot) endTranscript(ctx context.Context, e *runEnd, tr *agent.Transcript) error {
	if tr == nil {
		return nil
	}
	raw, err := agent.MarshalTranscript(tr)
	if err != nil {
		return err
	}
	e.r.Transcript, e.r.Usage = raw, tr.Usage
	e.audit, err = b.unjournaled(ctx, e.r, tr.Journal, e.unstored)
	return err
}

// endAnswered ends a run that answered (or failed, or gave up) with its
// answer.
func (b *Bot) endAnswered(ctx context.Context, e *runEnd, out agent.Outcome) error {
	r := e.r
	r.Status = RunDone
	if out.Status == agent.StatusFailed {
		r.Status = RunFailed
	}
	r.Answer, r.Reply = b.cfg.Redact.String(out.Answer), ""
	if r.Answer == "" {
		r.Answer = "Done."
	}
	return b.postEnd(ctx, e, b.answerOutbound(r, out.Transcript), r.Answer, "answer")
}

// endAsking ends a run that asks the user (a question or a confirmation):
// it waits for the answer. The question is posted only once the waiting
// run is saved, so a press at once finds it open; the post records its
// message id.
func (b *Bot) endAsking(ctx context.Context, e *runEnd, out agent.Outcome) error {
	r := e.r
	w := &Waiting{Kind: "ask", Question: out.Question, Options: out.Options, Key: newID()[:8], UserID: r.UserID}
	var buttons []Button
	if out.Status == agent.StatusConfirming {
		w.Kind = "confirm"
		buttons = []Button{{Label: out.Label, Data: answerData(w.Key, "y")}, {Label: "Cancel", Data: answerData(w.Key, "n")}}
	} else {
		for i, o := range out.Options {
			buttons = append(buttons, Button{Label: o, Data: answerData(w.Key, strconv.Itoa(i))})
		}
	}
	r.Status, r.Waiting, r.Reply = RunWaiting, w, ""
	text := out.Question
	if text == "" {
		text = "Can you tell me more?"
	}
	m := r.outgoing(text)
	m.Buttons, m.Question = buttons, true
	ob := b.outbound(r.Platform, m)
	ob.RunID, ob.WaitKey = r.ID, w.Key
	return b.postEnd(ctx, e, ob, text, "question")
}

// endInterrupted ends a run that was stopped: on shutdown it stays
// working and resumes at the next start; stopped by the bot (e.stopped)
// it is cancelled, and says so with what it changed before.
func (b *Bot) endInterrupted(ctx context.Context, e *runEnd, out agent.Outcome) error {
	r := e.r
	if e.stopped == "" {
		if err := b.commitEnd(ctx, e, Change{Run: r}); err != nil {
			return fmt.Errorf("bot: save run %s: %w", r.ID, err)
		}
		b.afterEnd(ctx, e)
		e.log.Info("run interrupted; it resumes at next start")
		return nil
	}
	r.Status, r.Reply = RunCancelled, ""
	r.Answer = b.fit(r.Platform, e.stopped+" "+b.doneList(r.Platform, out.Transcript))
	// What the run changed before the cancel joins the history, as a
	// final answer does.
	return b.postEnd(ctx, e, b.answerOutbound(r, out.Transcript), r.Answer, "answer")
}

// answerOutbound is r's answer as posted: with its details and, when
// the run wrote, an Undo button.
func (b *Bot) answerOutbound(r *Run, tr *agent.Transcript) Outbound {
	m := withUndo(r.outgoing(r.Answer), r, tr)
	if r.Autopilot {
		m = autopilotButtons(m) // nobody asked: Undo and Stop, no rating
	} else {
		m = withFeedback(m, r)
	}
	return b.outbound(r.Platform, b.details(m, r))
}

// commitEnd saves c with what every end of e's run saves: its audit, its
// tokens and the retirement of its job.
func (b *Bot) commitEnd(ctx context.Context, e *runEnd, c Change) error {
	c.Audit, c.Count, c.DeleteJob = e.audit, e.count, e.jobID
	return b.commit(context.WithoutCancel(ctx), c)
}

// postEnd saves the run with text, its answer or question, in the
// history and in the outbox (so that a crash before the post leaves it
// for the next start to post), then posts it: in the background for a
// worker's job (see handOff).
func (b *Bot) postEnd(ctx context.Context, e *runEnd, ob Outbound, text, what string) error {
	r := e.r
	ob.RunID = r.ID // its preview, if a dead process left one, is deleted first (orphan.go)
	c := Change{Run: r, Send: []Outbound{ob},
		Message: &Message{ThreadKey: r.ThreadKey, Role: RoleAssistant, Text: text, RunID: r.ID, At: b.cfg.Now()}}
	status := r.Status
	bg := context.WithoutCancel(ctx)
	b.handOff(bg, r, func() error {
		if err := b.commitEnd(bg, e, c); err != nil {
			return fmt.Errorf("bot: save run %s and its %s: %w", r.ID, what, err)
		}
		// What afterEnd posts (a prompt to reconnect) comes after the
		// answer. The preview, if any, decides how the answer is shown
		// (preview.go); a question or a stop removes it first.
		deliver := func(Stream) {
			switch pv := e.preview; {
			case pv != nil && what == "answer":
				pv.answer(bg, ob)
			case pv != nil:
				pv.withdraw(bg)
				b.deliver(bg, ob)
			default:
				b.deliver(bg, ob)
			}
			b.afterEnd(ctx, e)
		}
		if e.preview != nil {
			b.afterPreview(bg, e.preview, deliver)
		} else {
			deliver(nil)
		}
		msg := "run ended"
		if status == RunWaiting {
			msg = "run waits for an answer"
		}
		e.log.Info(msg, slog.String("status", string(status)), slog.Int("tokens", r.Usage.Total()), slog.Int("model_calls", r.Usage.Calls))
		return nil
	})
	return nil
}

// afterEnd does what follows a run's end once it is saved and posted:
// after a refused Todoist token, the prompt to connect again.
func (b *Bot) afterEnd(ctx context.Context, e *runEnd) {
	if e.reconnect {
		b.rejected(ctx, e.r)
	}
}

// doneList is the agent's list of what a run changed, with how to undo
// it as typed on platform.
func (b *Bot) doneList(platform string, tr *agent.Transcript) string {
	text := tr.DoneList()
	if tr != nil && len(tr.Journal) > 0 {
		text += "\n" + b.commandName(platform, "undo") + " reverts it."
	}
	return text
}

// unjournaled returns audit entries for the writes of applied not yet in
// r's journal (a resumed run journaled its earlier ones when it paused).
// unstored says r was not stored as this execution began: its journal,
// written only with a run's end, is empty (not read).
func (b *Bot) unjournaled(ctx context.Context, r *Run, applied []agent.Applied, unstored bool) ([]AuditEntry, error) {
	if len(applied) == 0 {
		return nil, nil
	}
	var have []AuditEntry
	if !unstored {
		var err error
		if have, err = b.store.RunAudit(ctx, r.ID); err != nil {
			return nil, fmt.Errorf("bot: read journal of %s: %w", r.ID, err)
		}
	}
	if len(applied) <= len(have) {
		return nil, nil
	}
	var entries []AuditEntry
	for _, a := range applied[len(have):] {
		entries = append(entries, AuditEntry{RunID: r.ID, ThreadKey: r.ThreadKey, Write: a.Write, Inverse: a.Inverse, Summary: a.Summary, At: b.cfg.Now()})
	}
	return entries, nil
}

// clearButtons replaces a question's buttons with the choice made.
func (b *Bot) clearButtons(ctx context.Context, r *Run, answer string) {
	if r.Waiting == nil || r.Waiting.MessageID == "" {
		return
	}
	p, err := b.platform(r.Platform)
	if err != nil {
		return
	}
	if ed, ok := p.(Editor); ok {
		text := r.Waiting.Question + "\n→ " + answer
		if err := ed.Edit(ctx, r.Waiting.MessageID, r.outgoing(text)); err != nil {
			b.log.Warn("clear buttons", slog.Any("err", err))
		}
	}
}

// dropWaiting cancels a thread's run that waits for the user.
func (b *Bot) dropWaiting(ctx context.Context, key, why string) error {
	r, err := b.waitingRun(ctx, key)
	if err != nil || r == nil {
		return err
	}
	return b.drop(ctx, r, why)
}

// drop cancels r, a run that waits for the user.
func (b *Bot) drop(ctx context.Context, r *Run, why string) error {
	b.clearButtons(ctx, r, "(dropped: "+why+")")
	r.Status, r.Waiting, r.Updated = RunCancelled, nil, b.cfg.Now()
	if err := b.store.SaveRun(ctx, r); err != nil {
		return fmt.Errorf("bot: drop run %s: %w", r.ID, err)
	}
	return nil
}

// cancel stops the thread's running run at its next step, or drops the
// question it waits on.
func (b *Bot) cancel(ctx context.Context, in Incoming) {
	key := in.ThreadKey()
	if b.stopRun(key) || b.stopElsewhere(ctx, key) {
		b.replyLater(ctx, in.Platform, reply(in, "Stopping at the next step…"))
		return
	}
	r, err := b.waitingRun(ctx, key)
	if err != nil {
		b.log.Error("cancel", slog.Any("err", err))
	}
	if r == nil {
		b.replyLater(ctx, in.Platform, reply(in, "Nothing is running here."))
		return
	}
	if err := b.drop(ctx, r, "cancelled"); err != nil {
		b.log.Error("cancel", slog.Any("err", err))
	}
	b.replyLater(ctx, in.Platform, reply(in, "Cancelled; I dropped my open question."))
}

// ErrCancelStored is the error of a run's save to a Shared store that
// checks cancels (CancelFence) when a /cancel was stored for the
// conversation since the run began: the save is refused, and the run
// stops as /cancel stops it.
var ErrCancelStored = errors.New("bot: a /cancel was stored for this conversation since the run began")

// CancelFence is a Shared store that checks, in the transaction of a
// run's save, the cancels stored for its conversation (Shared.Cancels)
// instead of a read of their own before it.
type CancelFence interface {
	// FenceCancels returns ctx carrying mark, the latest cancel of
	// conversation key as the run began: a save made with it fails with
	// ErrCancelStored when a later one is stored.
	FenceCancels(ctx context.Context, key string, mark int64) context.Context
}

// checkCancels stops the run of conversation key when a /cancel was
// stored for it since it began (a Shared store's), and returns the
// context for its save: with a CancelFence store, the check is left to
// the save, which the returned context makes fail with ErrCancelStored
// (one round trip less a step).
func (b *Bot) checkCancels(ctx context.Context, key string) context.Context {
	if b.feed == nil {
		return ctx
	}
	cf, ok := b.feed.q.(CancelFence)
	if !ok {
		b.stopCancelled(ctx, key)
		return ctx
	}
	b.mu.Lock()
	ar := b.running[key]
	b.mu.Unlock()
	if ar == nil {
		return ctx
	}
	return cf.FenceCancels(ctx, key, ar.cancelMark)
}

// stopRun stops the run of thread key this process is running, at its
// next step, and reports whether there was one.
func (b *Bot) stopRun(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	ar := b.running[key]
	if ar != nil {
		ar.cancelled = true
		ar.cancel(errCancelled)
	}
	return ar != nil
}

// stopElsewhere, with a Shared store, stores a /cancel for the
// thread's run when one is working there (or its job waits: a run not
// saved yet), which the process running it reads at its next step, and
// reports whether it did.
func (b *Bot) stopElsewhere(ctx context.Context, key string) bool {
	if b.feed == nil {
		return false
	}
	stored, err := b.feed.q.Cancel(ctx, key)
	if err != nil {
		b.log.Error("cancel", slog.Any("err", err))
	}
	return stored
}
