package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// drain runs the queued actions of the last reply, in order; consecutive
// reads run concurrently. It returns nil once they are done, or the
// outcome when the run ends or waits.
func (r *runner) drain(ctx context.Context) *Outcome {
	for len(r.tr.Calls) > 0 {
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		c := r.tr.Calls[0]
		a, ok := decode(c)
		if !ok || !r.offered(c.Name) {
			valid := r.tr.Actions
			if len(valid) == 0 {
				valid = ActionNames()
			}
			r.tr.Failures++
			r.result(c.ID, fmt.Sprintf("Error: %s cannot be run in this request. Valid actions: %s.", c.Name, strings.Join(valid, ", ")))
			r.popCall(c.ID)
			continue
		}
		if obs, summary := r.refused(c.Name, a); obs != "" {
			r.tr.Failures++
			r.result(c.ID, obs)
			r.observe(Event{Kind: EventNote, Step: r.tr.Steps, Action: c.Name, Summary: summary})
			r.popCall(c.ID)
			continue
		}
		if _, ctl := a.(controller); !ctl && !c.Confirmed && r.loops(c) {
			return r.stop(ctx, "I was repeating the same action ("+c.Name+") without progress")
		}
		var o *Outcome
		switch a := a.(type) {
		case reader:
			o = r.readAll(ctx)
		case writer:
			o = r.write(ctx, c, a)
		case controller:
			o = a.control(ctx, r, c.ID)
		}
		if o != nil {
			return o
		}
		if err := r.save(ctx); err != nil {
			return r.fail(ctx, errSaving(err))
		}
	}
	return nil
}

// readAll runs the reads at the head of the queue concurrently.
func (r *runner) readAll(ctx context.Context) *Outcome {
	var batch []call
	var reads []reader
	for i, c := range r.tr.Calls {
		a, _ := decode(c)
		rd, ok := a.(reader)
		if !ok || !r.offered(c.Name) || !r.allowed(c.Name) {
			break
		}
		if i > 0 && r.loops(c) { // the first was counted by drain
			return r.stop(ctx, "I was repeating the same action ("+c.Name+") without progress")
		}
		batch, reads = append(batch, c), append(reads, rd)
	}
	results := make([]readResult, len(batch))
	var wg sync.WaitGroup
	for i, rd := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.slow(ctx, "Todoist is slow to answer; still trying…", func() error {
				results[i] = rd.read(ctx, r)
				return nil
			})
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return r.interrupted(ctx)
	}
	for i, c := range batch {
		res := results[i]
		if res.Fatal != nil {
			return r.fail(ctx, res.Fatal)
		}
		if strings.HasPrefix(res.Obs, "Error:") {
			r.tr.Failures++
		}
		r.readResult(c.ID, res)
		r.observe(Event{Kind: EventAction, Step: r.tr.Steps, Action: c.Name, Summary: res.Summary})
	}
	r.tr.Calls = r.tr.Calls[len(batch):]
	return nil
}

// write runs a write action: it waits for the user's yes when gated, is
// planned, saved as pending with its uuids, then sent.
func (r *runner) write(ctx context.Context, c call, w writer) *Outcome {
	if !c.Confirmed {
		if label, q := r.gate(ctx, c.Name, w); label != "" {
			r.tr.Wait = &wait{Kind: "confirm", CallID: c.ID, Question: q, Label: label}
			return r.end(ctx, StatusConfirming, "", nil)
		}
	}
	p, ws, err := r.planWrite(ctx, c.Name, w)
	if err != nil {
		if ctx.Err() != nil {
			return r.interrupted(ctx)
		}
		if fatalCode(err) {
			return r.fail(ctx, err)
		}
		r.tr.Failures++
		r.result(c.ID, "Error: "+ErrorMessageOf(err)+". Nothing was changed.")
		r.popCall(c.ID)
		return nil
	}
	if len(ws) == 0 {
		obs := strings.Join(p.Notes, "\n")
		if p.Rejected > 0 {
			r.tr.Failures++
			obs += "\nNothing was changed."
		}
		r.result(c.ID, obs)
		r.popCall(c.ID)
		r.observe(Event{Kind: EventAction, Step: r.tr.Steps, Action: c.Name, Summary: progressLine(c.Name, tally{failed: p.Rejected})})
		return nil
	}
	r.tr.Pending = &pendingWrite{Call: c, Writes: ws, Plan: p}
	if err := r.save(ctx); err != nil {
		return r.fail(ctx, errSaving(err))
	}
	return r.send(ctx)
}

// finish ends the run with the reply's final_answer or fail_task, whose
// observation is obs, and answer for the user. It ends the run
// only when every other call of the reply succeeded; if not, the call is
// answered and dropped, and the model goes on (nil).
func (r *runner) finish(ctx context.Context, callID, obs string, status Status, answer string) *Outcome {
	if r.tr.Failures > 0 {
		r.result(callID, "Not accepted: another action in this reply failed. Read its observation, fix it, then answer.")
		r.popCall(callID)
		return nil
	}
	r.result(callID, obs)
	r.popCall(callID)
	r.skipRest(0, "Not run: the run ended before it.")
	return r.end(ctx, status, answer, nil)
}

// control ends the run with the answer, or with the engine's report of
// the run's writes when the model left the answer out.
func (a *FinalAnswerArgs) control(ctx context.Context, r *runner, callID string) *Outcome {
	answer := strings.TrimSpace(a.Answer)
	if answer == "" && r.tr.Failures == 0 {
		// The report is in English and says only what was written.
		why := ""
		switch {
		case len(r.tr.Journal) == 0:
			why = "nothing was changed, so give the answer yourself"
		case r.tr.Language != "" && !english(r.tr.Language):
			why = "the answer is to be in " + r.tr.Language + ", so write it yourself"
		}
		if why != "" {
			// Controllers escape drain's loop detection; this refusal
			// does not end the run, so it is counted here.
			if r.loops(call{Name: ActFinalAnswer, Args: json.RawMessage(`{}`)}) {
				return r.stop(ctx, "I was repeating the same action ("+ActFinalAnswer+") without progress")
			}
			r.tr.Failures++
			r.result(callID, "Not accepted: "+why+".")
			r.popCall(callID)
			return nil
		}
		answer = r.tr.Report()
		r.tr.Reported = true
	}
	return r.finish(ctx, callID, "Done.", StatusDone, answer)
}

// english reports whether lang, a language's name or tag, is English.
func english(lang string) bool {
	l := strings.ToLower(strings.TrimSpace(lang))
	return l == "en" || strings.HasPrefix(l, "en-") || strings.HasPrefix(l, "en_") || strings.HasPrefix(l, "english")
}

func (a *FailTaskArgs) control(ctx context.Context, r *runner, callID string) *Outcome {
	answer := "I couldn't do that: " + strings.TrimSpace(a.Reason)
	if len(r.tr.Journal) > 0 {
		answer += "\n" + r.tr.DoneList()
	}
	return r.finish(ctx, callID, "Stopped.", StatusFailed, answer)
}

func (a *AskUserArgs) control(ctx context.Context, r *runner, callID string) *Outcome {
	r.tr.Wait = &wait{Kind: "ask", CallID: callID, Question: strings.TrimSpace(a.Question), Options: a.Options}
	return r.end(ctx, StatusAsking, "", nil)
}

// send applies the pending writes (with their saved uuids) and records
// the results. It returns nil to go on.
func (r *runner) send(ctx context.Context) *Outcome {
	p := r.tr.Pending
	// A cancel or shutdown takes effect between steps, never inside a
	// write: cut off mid-request, Todoist may apply what the run never
	// learns of, so it could be neither reported nor undone.
	wctx, stop := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer stop()
	var results []WriteResult
	err := r.slow(ctx, "Todoist is slow to answer; still trying…", func() error {
		var err error
		results, err = r.e.tasks.Apply(wctx, p.Writes)
		return err
	})
	if err == nil {
		r.record(p, results, nil)
		return nil
	}
	// A failed batch may have been applied in part (a big batch goes out
	// in several requests): what Todoist confirmed is journaled, whatever
	// else happens, so that it is reported and can be undone.
	done, rest := splitApplied(p, results)
	if ctx.Err() != nil {
		if rest == nil {
			r.record(p, results, nil)
			return r.interrupted(ctx)
		}
		// The rest stays pending: a resumed run re-sends it with the
		// same uuids; a cancelled run reports what was journaled.
		if obs := r.keepApplied(done); obs != "" {
			rest.Done = append(rest.Done, obs)
		}
		r.tr.Pending = rest
		return r.interrupted(ctx)
	}
	if done == nil && ErrorCodeOf(err) == ErrInvalid {
		// Refused before anything was sent.
		r.tr.Pending = nil
		r.tr.Failures++
		r.result(p.Call.ID, "Error: "+ErrorMessageOf(err)+". Nothing was changed; fix it and retry.")
		r.popCall(p.Call.ID)
		return nil
	}
	if fatalCode(err) {
		r.keepApplied(done)
		r.tr.Pending = nil
		return r.fail(ctx, err)
	}
	r.record(p, results, err)
	return nil
}

// record records what became of a pending write, its observation
// included, and ends it. batchErr is the error of a batch that failed as
// a whole: a write it left unconfirmed is reported as such.
func (r *runner) record(p *pendingWrite, results []WriteResult, batchErr error) {
	var unsure []string
	if batchErr != nil {
		keep := make([]int, 0, len(p.Writes))
		for i := range p.Writes {
			// A write refused on its own keeps its reason; one the
			// batch's failure left unknown is "not confirmed".
			if applied(p.Writes[i], results, i) || i < len(results) && results[i].Err != nil && !errors.Is(batchErr, results[i].Err) {
				keep = append(keep, i)
			} else {
				unsure = append(unsure, p.Plan.Items[i].Ref)
			}
		}
		sub := p.subset(keep)
		kept := make([]WriteResult, len(keep))
		for j, i := range keep {
			kept[j] = results[i]
		}
		p, results = sub, kept
	}
	before := len(r.tr.Journal)
	obs, summary := r.applyResults(p.Plan, p.Writes, results)
	if len(r.tr.Journal) > before {
		// Progress: loop detection counts from here.
		r.tr.Seen = nil
	}
	if len(unsure) > 0 {
		line := fmt.Sprintf("✗ not confirmed: %s. Todoist failed (%s), and it may or may not have applied them; read the current state before retrying them.",
			strings.Join(unsure, ", "), ErrorMessageOf(batchErr))
		obs = strings.TrimPrefix(obs+"\n"+line, "\n")
		warn := "⚠️ " + plural(len(unsure), "change") + " not confirmed"
		if summary == progressLine("", tally{}) {
			summary = warn
		} else {
			summary += " · " + warn
		}
	}
	if strings.Contains(obs, "✗") {
		r.tr.Failures++
	}
	if len(p.Done) > 0 {
		// What an earlier, interrupted attempt applied.
		obs = strings.Join(p.Done, "\n") + "\n" + obs
	}
	r.tr.Pending = nil
	r.result(p.Call.ID, obs)
	r.popCall(p.Call.ID)
	r.observe(Event{Kind: EventAction, Step: r.tr.Steps, Action: p.Call.Name, Summary: summary})
}

// keepApplied journals the writes of done, which Todoist applied while
// the rest of their batch failed, and returns their observation.
func (r *runner) keepApplied(done *pendingWrite) string {
	if done == nil {
		return ""
	}
	obs, summary := r.applyResults(done.Plan, done.Writes, done.results)
	r.tr.Seen = nil
	r.observe(Event{Kind: EventAction, Step: r.tr.Steps, Action: done.Call.Name, Summary: summary})
	return obs
}

// applied reports whether results say that the i-th write of a batch
// that failed as a whole was applied: it has a result without an error
// (and, for a create, its new id).
func applied(w Write, results []WriteResult, i int) bool {
	if i >= len(results) || results[i].Err != nil {
		return false
	}
	return w.TempID == "" || results[i].NewID != ""
}

// splitApplied splits a pending write whose batch failed into the writes
// Todoist applied, with their results, and the rest, to be sent again;
// temp ids the applied creates resolved are replaced by the real ids in
// the rest. Either may be nil.
func splitApplied(p *pendingWrite, results []WriteResult) (done, rest *pendingWrite) {
	var in, out []int
	ids := map[string]string{}
	for i, w := range p.Writes {
		if applied(w, results, i) {
			in = append(in, i)
			if w.TempID != "" {
				ids[w.TempID] = results[i].NewID
			}
		} else {
			out = append(out, i)
		}
	}
	if len(in) > 0 {
		done = p.subset(in)
		done.Done = nil
		for _, i := range in {
			done.results = append(done.results, results[i])
		}
	}
	if len(out) > 0 {
		rest = p.subset(out)
		sub := func(s *string) {
			if real, ok := ids[*s]; ok {
				*s = real
			}
		}
		for i := range rest.Writes {
			w := &rest.Writes[i]
			sub(&w.ID)
			sub(&w.ProjectID)
			sub(&w.SectionID)
			sub(&w.ParentID)
		}
		for i := range rest.Plan.Items {
			it := &rest.Plan.Items[i]
			for tmp, real := range ids {
				it.Obs = strings.ReplaceAll(it.Obs, tmp, real)
			}
			for j := range it.Inverse {
				inv := &it.Inverse[j]
				sub(&inv.ID)
				sub(&inv.ProjectID)
				sub(&inv.SectionID)
			}
		}
		// The notes were for the first attempt's observation.
		if done != nil {
			rest.Plan.Notes, rest.Plan.Rejected = nil, 0
		}
	}
	return done, rest
}
