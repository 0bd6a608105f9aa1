package todoist_test

import (
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// TestApplyComments: a comment is note_add on its task, batched with the
// other writes; its temp id comes back as the comment's id, which
// note_delete then removes; a re-sent note_add answered without its id
// finds it by reading GET /comments; ids Todoist does not know are named.
func TestApplyComments(t *testing.T) {
	c, srv := newClient(t)
	task := srv.AddTask(todoisttest.Task{Content: "Buy cake"})
	other := srv.AddTask(todoisttest.Task{Content: "Call mum"})
	add := w(agent.Write{Kind: agent.AddComment, TempID: "tmp-c", ID: task.ID, Content: strp("chocolate, not lemon")})
	res, err := c.Apply(t.Context(), []agent.Write{
		add,
		w(agent.Write{Kind: agent.AddComment, TempID: "tmp-d", ID: other.ID, Content: strp("Sunday")}),
		w(agent.Write{Kind: agent.AddComment, TempID: "tmp-e", ID: "AAAAAAAAAAAAAAAA", Content: strp("lost")}),
	})
	if err != nil {
		t.Fatal(err)
	}
	if srv.SyncRequests() != 1 {
		t.Errorf("%d /sync requests, want the batch in one", srv.SyncRequests())
	}
	got := srv.Comments(task.ID)
	if res[0].Err != nil || len(got) != 1 || got[0].ID != res[0].NewID || got[0].Content != "chocolate, not lemon" {
		t.Fatalf("comment: %+v, on the task %+v", res[0], got)
	}
	if res[1].Err != nil || len(srv.Comments(other.ID)) != 1 {
		t.Errorf("second comment: %+v", res[1])
	}
	if msg := agent.ErrorMessageOf(res[2].Err); agent.ErrorCodeOf(res[2].Err) != agent.ErrNotFound || msg != "no task with id AAAAAAAAAAAAAAAA" {
		t.Errorf("comment on an unknown task: %s %q", agent.ErrorCodeOf(res[2].Err), msg)
	}

	// Sent again with its uuid, it is not applied twice and its id is
	// found by reading.
	again, err := c.Apply(t.Context(), []agent.Write{add})
	if err != nil || again[0].Err != nil || again[0].NewID != res[0].NewID || srv.Applied(add.UUID) != 1 {
		t.Errorf("re-sent: %+v %v, want id %s applied once (applied %d)", again, err, res[0].NewID, srv.Applied(add.UUID))
	}

	res, err = c.Apply(t.Context(), []agent.Write{
		w(agent.Write{Kind: agent.DeleteComment, ID: res[0].NewID}),
		w(agent.Write{Kind: agent.DeleteComment, ID: "BBBBBBBBBBBBBBBB"}),
	})
	if err != nil || res[0].Err != nil || len(srv.Comments(task.ID)) != 0 {
		t.Errorf("delete: %+v %v, comments left %+v", res, err, srv.Comments(task.ID))
	}
	if msg := agent.ErrorMessageOf(res[1].Err); agent.ErrorCodeOf(res[1].Err) != agent.ErrNotFound || msg != "no comment with id BBBBBBBBBBBBBBBB" {
		t.Errorf("delete of an unknown comment: %s %q", agent.ErrorCodeOf(res[1].Err), msg)
	}

	// Checked before anything is sent.
	for _, bad := range []agent.Write{
		{Kind: agent.AddComment, ID: task.ID, Content: strp("  ")},
		{Kind: agent.AddComment, ID: task.ID, Content: strp(strings.Repeat("x", 15001))},
		{Kind: agent.AddComment, Content: strp("no task")},
		{Kind: agent.DeleteComment},
	} {
		before := srv.SyncRequests()
		if _, err := c.Apply(t.Context(), []agent.Write{w(bad)}); agent.ErrorCodeOf(err) != agent.ErrInvalid || srv.SyncRequests() != before {
			t.Errorf("%+v: %v, want invalid and nothing sent", bad, err)
		}
	}
}
