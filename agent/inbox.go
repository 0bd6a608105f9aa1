package agent

import (
	"context"
	"fmt"
)

// Inbox returns the open tasks of the Inbox without a model call: one
// Snapshot, which on the Todoist client after the first is an
// incremental /sync (a small request however big the account). The
// bot's autopilot polls it to notice new tasks.
func (e *Engine) Inbox(ctx context.Context) ([]Task, error) {
	snap, err := e.tasks.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("agent: read the inbox: %w", err)
	}
	inbox := snap.InboxID()
	var out []Task
	for _, t := range snap.Tasks {
		if t.ProjectID == inbox && inbox != "" {
			out = append(out, t)
		}
	}
	return out, nil
}
