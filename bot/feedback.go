package bot

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Feedback ratings.
const (
	FeedbackGood = "good" // 👍
	FeedbackBad  = "bad"  // 👎
)

// Feedback is a person's rating of a run's answer: the 👍 or 👎 under it.
// Only the person who asked may rate; a later press replaces the rating.
type Feedback struct {
	Rating string    `json:"rating"` // FeedbackGood or FeedbackBad
	At     time.Time `json:"at"`
}

// feedbackPrefix starts the data of a feedback button: "f:<run id>:g"
// (👍) or "f:<run id>:b" (👎), 21 bytes: within Telegram's 64.
const feedbackPrefix = "f:"

// withFeedback adds the 👍 and 👎 buttons to a run's answer.
func withFeedback(m Outgoing, r *Run) Outgoing {
	m.Buttons = append(m.Buttons,
		Button{Label: "👍", Data: feedbackPrefix + r.ID + ":g", Feedback: FeedbackGood},
		Button{Label: "👎", Data: feedbackPrefix + r.ID + ":b", Feedback: FeedbackBad})
	return m
}

// feedbackButton reads a feedback button's run id and rating.
func feedbackButton(data string) (runID, rating string, ok bool) {
	rest, ok := strings.CutPrefix(data, feedbackPrefix)
	if !ok {
		return "", "", false
	}
	runID, r, ok := strings.Cut(rest, ":")
	switch {
	case !ok || runID == "":
		return "", "", false
	case r == "g":
		return runID, FeedbackGood, true
	case r == "b":
		return runID, FeedbackBad, true
	}
	return "", "", false
}

// pressFeedback records a rating with its run: only the person who
// asked may rate it, every press is answered, and pressing again
// replaces the rating. The run is saved before the press is
// acknowledged: an error means the platform should deliver it again.
func (b *Bot) pressFeedback(ctx context.Context, in Incoming, runID, rating string) error {
	r, err := b.pressedRun(ctx, in, runID, "Only the person who asked can rate this answer.")
	if r == nil || err != nil {
		return err
	}
	r.Feedback = &Feedback{Rating: rating, At: b.cfg.Now()}
	if err := b.store.SaveRun(ctx, r); err != nil {
		return fmt.Errorf("bot: save feedback on run %s: %w", runID, err)
	}
	text := "Thanks! Noted 👍"
	if rating == FeedbackBad {
		text = "Thanks; noted 👎. It helps me get better."
	}
	b.answerButtonLater(ctx, in, text)
	return nil
}

// feedbackCounts counts the ratings of runs: 👍, 👎.
func feedbackCounts(runs []*Run) (good, bad int) {
	for _, r := range runs {
		switch {
		case r.Feedback == nil:
		case r.Feedback.Rating == FeedbackGood:
			good++
		case r.Feedback.Rating == FeedbackBad:
			bad++
		}
	}
	return good, bad
}

// feedbackText is /usage's line about the ratings, "" without any.
func feedbackText(runs []*Run) string {
	good, bad := feedbackCounts(runs)
	if good+bad == 0 {
		return ""
	}
	return fmt.Sprintf("You rated %s: %d 👍, %d 👎.", plural(good+bad, "answer"), good, bad)
}
