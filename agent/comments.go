package agent

import (
	"context"
	"fmt"
)

// ActAddComments adds comments to tasks (Todoist's notes).
const ActAddComments = "add_comments"

// NewComment is one comment to add.
type NewComment struct {
	TaskID  string `json:"task_id" jsonschema:"minLength=1" jsonschema_description:"The task to comment on."`
	Content string `json:"content" jsonschema:"minLength=1,maxLength=15000" jsonschema_description:"The comment's text."`
}

// AddCommentsArgs are add_comments' arguments.
type AddCommentsArgs struct {
	Comments []NewComment `json:"comments" jsonschema:"minItems=1,maxItems=100" jsonschema_description:"Every comment to add, all in one call."`
}

func (*AddCommentsArgs) isAction() {}

func (a *AddCommentsArgs) plan(ctx context.Context, pl *planner) error {
	return pl.eachTask(ctx, a.touches(), func(i int, t Task) {
		w := Write{Kind: AddComment, TempID: "tmp-" + NewUUID(), ID: t.ID, Content: strp(a.Comments[i].Content)}
		pl.add(w, planItem{Ref: t.ID, Obs: fmt.Sprintf("Commented on %s %q: comment id %s", t.ID, t.Content, w.TempID),
			Summary: fmt.Sprintf("commented on %q", t.Content), Inverse: []Write{{Kind: DeleteComment, ID: w.TempID}}})
	})
}

func (a *AddCommentsArgs) gate(ctx context.Context, pl *planner) (label, question string) {
	return "Add " + plural(len(a.Comments), "comment"), "Comment on " + pl.taskNames(ctx, a.touches()) + "?"
}

func (*AddCommentsArgs) progress(t tally) string {
	if n := t.counts[AddComment]; n > 0 {
		return "💬 Added " + plural(n, "comment")
	}
	return ""
}

// touches: a comment changes the task it is on, so after text that gives
// orders one on a task the user never named waits for a yes.
func (a *AddCommentsArgs) touches() []string {
	ids := make([]string, len(a.Comments))
	for i, c := range a.Comments {
		ids[i] = c.TaskID
	}
	return ids
}
