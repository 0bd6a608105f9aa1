package todoisttest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestComments: note_add in the v1 shape (item_id, content, a temp_id
// mapped to the new comment, usable by a later command of the request),
// the shapes it refuses, note_delete, GET /comments and the "notes"
// resource.
func TestComments(t *testing.T) {
	s := New(t)
	task := s.AddTask(Task{Content: "Buy cake"})
	body := fmt.Sprintf(`{"commands":[
 {"type":"item_add","temp_id":"tmp-t","uuid":"u0","args":{"content":"Invite"}},
 {"type":"note_add","temp_id":"tmp-c","uuid":"u1","args":{"item_id":%[1]q,"content":"chocolate, not lemon"}},
 {"type":"note_add","temp_id":"tmp-d","uuid":"u2","args":{"item_id":"tmp-t","content":"everyone from work"}},
 {"type":"note_add","uuid":"u3","args":{"task_id":%[1]q,"content":"REST's name"}},
 {"type":"note_add","uuid":"u4","args":{"item_id":%[1]q,"content":" "}},
 {"type":"note_add","uuid":"u5","args":{"item_id":"AAAAAAAAAAAAAAAA","content":"x"}},
 {"type":"note_add","uuid":"u6","args":{"item_id":%[1]q,"content":%[2]q}},
 {"type":"note_add","temp_id":"tmp-e","uuid":"u7","args":{"item_id":%[1]q,"content":"to go"}},
 {"type":"note_delete","uuid":"u8","args":{"id":"tmp-e"}},
 {"type":"note_delete","uuid":"u9","args":{"id":"BBBBBBBBBBBBBBBB"}}]}`, task.ID, strings.Repeat("x", 15001))
	st, m := syncJSON(t, s, body)
	if st != http.StatusOK {
		t.Fatalf("status %d %v", st, m)
	}
	status := m["sync_status"].(map[string]any)
	for _, u := range []string{"u0", "u1", "u2", "u7", "u8"} {
		if status[u] != "ok" {
			t.Errorf("%s: %v, want ok", u, status[u])
		}
	}
	for u, want := range map[string]string{"u3": "ARGUMENT_MISSING", "u4": "ARGUMENT_MISSING", "u5": "ITEM_NOT_FOUND", "u6": "INVALID_ARGUMENT_VALUE", "u9": "NOTE_NOT_FOUND"} {
		if e, _ := status[u].(map[string]any); e["error_tag"] != want {
			t.Errorf("%s: %v, want %s", u, status[u], want)
		}
	}
	if e, _ := status["u3"].(map[string]any); e["error_extra"].(map[string]any)["argument"] != "item_id" {
		t.Errorf("task_id instead of item_id: %v, want item_id named missing", e)
	}
	mapping := m["temp_id_mapping"].(map[string]any)
	cid, _ := mapping["tmp-c"].(string)
	if !idRE.MatchString(cid) {
		t.Fatalf("temp_id_mapping %v, want the comment's id", mapping)
	}
	got := s.Comments(task.ID)
	if len(got) != 1 || got[0].ID != cid || got[0].Content != "chocolate, not lemon" {
		t.Errorf("comments on the task: %+v, want the one comment %s", got, cid)
	}
	if c := s.Comments(mapping["tmp-t"].(string)); len(c) != 1 || c[0].Content != "everyone from work" {
		t.Errorf("comments on the task made in the request: %+v", c)
	}

	// GET /comments names the task item_id.
	st, m = call(t, s, http.MethodGet, "/comments?task_id="+task.ID, "", "")
	res, _ := m["results"].([]any)
	if st != http.StatusOK || len(res) != 1 || res[0].(map[string]any)["item_id"] != task.ID || res[0].(map[string]any)["id"] != cid {
		t.Errorf("GET /comments: %d %v", st, m)
	}
	for _, q := range []string{"", "?task_id=" + task.ID + "&project_id=" + s.InboxID()} {
		if st, m := call(t, s, http.MethodGet, "/comments"+q, "", ""); st != http.StatusBadRequest {
			t.Errorf("GET /comments%s: %d %v, want 400", q, st, m)
		}
	}
	// The notes resource; a deleted task takes its comments along.
	_, m = syncJSON(t, s, `{"sync_token":"*","resource_types":["notes"]}`)
	if notes, _ := m["notes"].([]any); len(notes) != 2 {
		t.Errorf("notes: %v, want the 2 comments", m["notes"])
	}
	syncJSON(t, s, fmt.Sprintf(`{"commands":[{"type":"item_delete","uuid":"u10","args":{"id":%q}}]}`, task.ID))
	if c := s.Comments(task.ID); len(c) != 0 {
		t.Errorf("comments of a deleted task: %+v", c)
	}
}
