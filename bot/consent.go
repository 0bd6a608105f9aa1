package bot

import (
	"context"
	"fmt"
	"strings"
)

// sentBefore reports whether in, a typed message of the person a run
// asked, was sent before the run's question was posted: then it is not
// an answer, whatever it says ("ok thanks" typed while the run was
// working confirms nothing it asks afterwards). It returns r as it is
// once the question's post is recorded.
//
// The order is the platform's own (Sequencer): the message's id against
// the question's. A question not posted yet has been answered by nobody;
// one being posted is waited for, since its post and the recording of
// its id go ahead of anything queued after them for the chat. A nil run
// means the question was dropped meanwhile (/cancel). On a
// platform that cannot order its messages, a message counts as an
// answer once the question is posted.
func (b *Bot) sentBefore(ctx context.Context, r *Run, in Incoming) (*Run, bool, error) {
	q := b.queue(r.Platform)
	if q == nil {
		return r, true, nil
	}
	r, err := b.questionPosted(ctx, r)
	if r == nil || err != nil {
		return r, false, err
	}
	posted := r.Waiting.MessageID
	seq, ok := q.p.(Sequencer)
	if !ok {
		return r, posted == "", nil
	}
	if posted == "" || in.MessageID == "" {
		return r, true, nil
	}
	after, ok := seq.After(in.MessageID, posted)
	return r, !ok || !after, nil
}

// questionPosted returns r once its question's post is done and its id
// recorded, or failed: the post (and its delivery record) is queued on
// the chat's lane ahead of anything queued after it. nil: the question
// was dropped meanwhile (/cancel).
func (b *Bot) questionPosted(ctx context.Context, r *Run) (*Run, error) {
	q := b.queue(r.Platform)
	if q == nil || r.Waiting.MessageID != "" {
		return r, nil
	}
	if err := q.s.Do(ctx, r.ChatID, "wait for the question's post", func(context.Context) error { return nil }); err != nil {
		return r, fmt.Errorf("bot: wait for the question of run %s: %w", r.ID, err)
	}
	now, err := b.waitingRun(ctx, r.ThreadKey)
	if err != nil {
		return r, err
	}
	if now == nil || now.ID != r.ID {
		return nil, nil
	}
	return now, nil
}

// early keeps in, sent before r's question was posted, as words for the
// model: the question stays open, and the words go to the model with its
// answer (they are in the conversation's history too, for later runs).
func (b *Bot) early(ctx context.Context, r *Run, in Incoming) error {
	text := strings.TrimSpace(in.Text)
	if text == "" {
		return nil
	}
	r.Early = append(r.Early, text)
	if err := b.store.SaveRun(ctx, r); err != nil {
		return fmt.Errorf("bot: keep the words sent before the question of run %s: %w", r.ID, err)
	}
	return nil
}

// withEarly is the answer the model hears for a run's question: the
// answer, then what the person wrote before the question was posted. A
// plain yes or no to a confirmation is left as it is (the agent confirms
// on an exact yes); the words are then in the history of later runs.
func withEarly(r *Run, answer string) string {
	if len(r.Early) == 0 || answer == "" || (r.Waiting != nil && r.Waiting.Kind == "confirm" && (answer == "yes" || answer == "no")) {
		return answer
	}
	quoted := make([]string, len(r.Early))
	for i, e := range r.Early {
		quoted[i] = "“" + e + "”"
	}
	return answer + "\n(Before the question was posted, they had also written: " + strings.Join(quoted, ", ") + ". That was not an answer to it.)"
}
