package todoist

import (
	"context"
	"net/http"
	"net/url"

	"github.com/tidybot/tidybot/agent"
)

// maxComment is the longest comment: POST /comments takes "content
// (≤15000)" (developer.todoist.com/api/v1 #tag/Comments).
const maxComment = 15000

// restComment is a comment from GET /comments: v1 names its task
// item_id, as /sync does, not task_id (Doist/todoist-api-python
// todoist_api_python/models.py; Doist/todoist-api-typescript
// src/types/sync/resources/notes.ts).
type restComment struct {
	ID        string `json:"id"`
	ItemID    string `json:"item_id"`
	Content   string `json:"content"`
	PostedAt  string `json:"posted_at"`
	IsDeleted bool   `json:"is_deleted"`
}

// findComment: the comments with w's text on w's task (GET /comments
// asks for the task as task_id).
func findComment(ctx context.Context, c *Client, w agent.Write) ([]candidate, error) {
	cs, err := list[restComment](ctx, c, call{method: http.MethodGet, path: "/comments", query: url.Values{"task_id": {w.ID}}})
	var cands []candidate
	for _, x := range cs {
		if !x.IsDeleted && x.ItemID == w.ID && w.Content != nil && x.Content == *w.Content {
			cands = append(cands, candidate{x.ID, x.PostedAt})
		}
	}
	return cands, err
}
