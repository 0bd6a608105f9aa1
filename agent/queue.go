package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// queue records the model's reply in the conversation and queues the
// calls it makes; an unusable call is answered with a repair prompt. It
// returns the problems found.
func (r *runner) queue(resp Response) []*replyError {
	var problems []*replyError
	if r.tr.Protocol == ProtocolTools && len(resp.ToolCalls) > 0 {
		msg := Message{Role: RoleAssistant, Content: resp.Content, State: resp.State}
		var calls []call
		var bad []ToolCall
		for i, tc := range resp.ToolCalls {
			if tc.ID == "" {
				tc.ID = fmt.Sprintf("call_%d_%d", r.tr.Steps, i)
			}
			c, err := parseToolCall(tc)
			if err == nil {
				c.Args, err = r.tr.Known.expandFiling(c.Name, c.Args)
			}
			if err != nil {
				problems = append(problems, asReplyError(err, tc.Arguments))
				bad = append(bad, tc)
				tc = keptCall(tc)
			} else {
				calls = append(calls, c)
			}
			msg.ToolCalls = append(msg.ToolCalls, tc)
		}
		r.tr.Messages = append(r.tr.Messages, msg)
		for i, tc := range bad {
			r.result(tc.ID, repairText(problems[i], r.tr.Protocol))
		}
		// A final answer is judged once the reply's other calls have run.
		slices.SortStableFunc(calls, func(a, b call) int { return cmp.Compare(ends(a), ends(b)) })
		for i := range calls {
			calls[i].Args = r.tr.Known.expand(calls[i].Args)
		}
		r.tr.Calls = calls
		return problems
	}
	// The json protocol, or a tools reply that came as text: the envelope
	// is parsed locally first.
	msg := Message{Role: RoleAssistant, Content: resp.Content, State: resp.State}
	_, c, err := parseEnvelope(resp.Content)
	sent := c.Args // as the model wrote it, for the conversation
	if err == nil {
		c.Args, err = r.tr.Known.expandFiling(c.Name, c.Args)
	}
	if err != nil {
		re := asReplyError(err, resp.Content)
		msg.Content = clip(resp.Content, maxKept)
		r.tr.Messages = append(r.tr.Messages, msg, Message{Role: RoleUser, Content: repairText(re, r.tr.Protocol)})
		r.tr.Calls = nil
		return []*replyError{re}
	}
	c.ID = fmt.Sprintf("step_%d", r.tr.Steps)
	if r.tr.Protocol == ProtocolTools {
		// Answer it as a tool call so the conversation stays valid.
		msg.ToolCalls = []ToolCall{{ID: c.ID, Name: c.Name, Arguments: string(sent)}}
	}
	r.tr.Messages = append(r.tr.Messages, msg)
	c.Args = r.tr.Known.expand(c.Args)
	r.tr.Calls = []call{c}
	return nil
}

// ends is 1 for a call that ends the run, else 0. Its action's type
// says so; the arguments need not be decoded (the sort asks per
// comparison).
func ends(c call) int {
	if d, ok := actionByName(c.Name); ok {
		if _, ok := d.New().(ender); ok {
			return 1
		}
	}
	return 0
}

// maxKept is the most of an unusable reply the conversation keeps: the
// model sees what it sent without every later call re-sending it whole.
const maxKept = 2000

// keptCall is an unusable tool call as the conversation keeps it: when
// long, its name is clipped and its arguments are replaced by a JSON
// object quoting their start (some servers parse the arguments of earlier
// calls).
func keptCall(tc ToolCall) ToolCall {
	if len(tc.Name) > maxQuoted {
		tc.Name = clip(tc.Name, maxQuoted)
	}
	if len(tc.Arguments) > maxKept {
		b, _ := json.Marshal(map[string]string{"clipped": clip(tc.Arguments, maxKept)})
		tc.Arguments = string(b)
	}
	return tc
}

func asReplyError(err error, value string) *replyError {
	var re *replyError
	if errors.As(err, &re) {
		return re
	}
	return &replyError{Problem: err.Error(), Value: value}
}

// repairText asks the model to fix an unusable reply, quoting the error,
// the offending value and the valid action names.
func repairText(re *replyError, p Protocol) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Error: your reply could not be used: %s.\nYou sent: %s\nValid actions: %s.\n", clip(re.Problem, 3*maxQuoted), clip(re.Value, maxQuoted), strings.Join(ActionNames(), ", "))
	if p == ProtocolJSON {
		b.WriteString(`Reply again with exactly one JSON object: {"thought": "...", "action": {"type": "<valid action>", ...arguments}}.`)
	} else {
		b.WriteString("Call a valid action again with corrected arguments.")
	}
	return b.String()
}

// slow runs fn, telling the user once if it takes long.
func (r *runner) slow(ctx context.Context, note string, fn func() error) error {
	// The note may fire after fn returned and the run went on: it reads
	// nothing of the transcript.
	ev := Event{Kind: EventNote, Step: r.tr.Steps, Summary: "⏳ " + note}
	t := time.AfterFunc(r.e.cfg.SlowAfter, func() {
		if !r.answering.Load() {
			r.observe(ev)
		}
	})
	defer t.Stop()
	return fn()
}

// fingerprint identifies an action with its arguments for loop detection.
func fingerprint(c call) string {
	var v any
	_ = json.Unmarshal(c.Args, &v)
	b, _ := json.Marshal(v) // map keys sorted: a canonical form
	return c.Name + " " + string(b)
}

// loops counts c and reports whether it has now been asked for three
// times since the last write that changed something: repetition without
// progress. A read → write → read cycle is progress and goes on.
func (r *runner) loops(c call) bool {
	if r.tr.Seen == nil {
		r.tr.Seen = map[string]int{}
	}
	fp := fingerprint(c)
	r.tr.Seen[fp]++
	return r.tr.Seen[fp] >= 3
}

// gated reports whether a write waits for the user's yes.
func (r *runner) gated(w writer) bool {
	policy := r.e.cfg.Confirm
	if r.tr.Confirm != "" {
		policy = r.tr.Confirm
	}
	switch policy {
	case ConfirmWrites:
		return true
	case ConfirmNever:
		return false
	}
	_, ok := w.(destructive)
	return ok
}
