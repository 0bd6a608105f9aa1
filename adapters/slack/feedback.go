package slack

import (
	"github.com/slack-go/slack"

	"github.com/tidybot/tidybot/bot"
)

// feedbackActionID is the action_id of the answer's feedback buttons.
const feedbackActionID = "feedback"

// splitFeedback separates the 👍/👎 pair (bot.Button.Feedback) from the
// other buttons of a message.
func splitFeedback(bs []bot.Button) (others []bot.Button, good, bad *bot.Button) {
	for i := range bs {
		switch bs[i].Feedback {
		case bot.FeedbackGood:
			good = &bs[i]
		case bot.FeedbackBad:
			bad = &bs[i]
		default:
			others = append(others, bs[i])
		}
	}
	return others, good, bad
}

// feedbackBlock renders the pair as Slack's own rating control: a
// feedback_buttons element in a context_actions block, each button's
// value the bot's button data (docs.slack.dev/reference/block-kit/block-elements/feedback-buttons-element:
// "must be used inside the context actions block"; text plain_text of at
// most 75 characters, value at most 2,000). A press arrives as a
// block_actions payload whose action carries the pressed button's value,
// as a button's does (actionIncoming). nil without the pair.
func feedbackBlock(good, bad *bot.Button) slack.Block {
	if good == nil || bad == nil {
		return nil
	}
	el := slack.NewFeedbackButtonsBlockElement(feedbackActionID,
		slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, clip(good.Label, 75), true, false), good.Data).WithAccessibilityLabel("Good answer"),
		slack.NewFeedbackButton(slack.NewTextBlockObject(slack.PlainTextType, clip(bad.Label, 75), true, false), bad.Data).WithAccessibilityLabel("Bad answer"))
	return slack.NewContextActionsBlock("feedback", el)
}
