package todoisttest

import (
	"net/http"
	"slices"
	"time"
	"unicode/utf8"
)

// Comments. /sync calls them "notes" (developer.todoist.com/api/v1
// #tag/Sync: "items" are tasks, "notes" comments) and the v1 shape names
// a comment's task item_id, on /sync and on GET /comments alike
// (Doist/todoist-api-typescript src/types/sync/resources/notes.ts
// NoteSchema: id, item_id, project_id, content, posted_at,
// file_attachment, posted_uid, uids_to_notify, reactions, is_deleted;
// Doist/todoist-api-python models.py reads item_id as the task id).
//
// note_add takes "item_id or project_id, content*" (developer.todoist.com
// /api/v1 #tag/Sync, command note_add; the TypeScript SDK's NoteAddArgs
// in src/types/sync/commands/notes.ts): a command naming neither (as one
// using REST's task_id does) fails ARGUMENT_MISSING item_id. As a create
// it maps its temp_id to the new comment's id in temp_id_mapping
// (#tag/Sync/Overview). note_delete takes the comment's id
// (NoteDeleteArgs). GET /comments takes task_id or project_id, "exactly
// one", and is paginated (developer.todoist.com/api/v1 #tag/Comments,
// Get Comments). Content is at most 15,000 characters (POST
// /comments, #tag/Comments). NOTE_NOT_FOUND, the answer to a comment
// both on a task and a project, and a 404 for GET /comments of an
// unknown task are plausible stand-ins.

// maxCommentContent is the longest comment.
const maxCommentContent = 15000

// Comment is a comment on a task (TaskID) or a project (ProjectID).
type Comment struct {
	ID        string
	TaskID    string
	ProjectID string
	Content   string
	PostedAt  time.Time
}

// commentJSON is a comment on /sync ("notes") and on GET /comments.
type commentJSON struct {
	ID             string              `json:"id"`
	ItemID         *string             `json:"item_id"`
	ProjectID      *string             `json:"project_id"`
	Content        string              `json:"content"`
	PostedAt       string              `json:"posted_at"`
	PostedUID      string              `json:"posted_uid"`
	FileAttachment any                 `json:"file_attachment"`
	UIDsToNotify   []string            `json:"uids_to_notify"`
	Reactions      map[string][]string `json:"reactions"`
	IsDeleted      bool                `json:"is_deleted"`
}

func (s *Server) commentJSON(c *Comment) commentJSON {
	return commentJSON{ID: c.ID, ItemID: nullable(c.TaskID), ProjectID: nullable(c.ProjectID), Content: c.Content,
		PostedAt: ts(c.PostedAt), PostedUID: s.st.userID}
}

// execNote runs note_add and note_delete; ok is false for another
// command. Callers hold s.mu.
func (s *Server) execNote(typ string, a *cmdArgs) (newID string, e *apiError, ok bool) {
	switch typ {
	case "note_add":
		newID, e = s.noteAdd(a)
		return newID, e, true
	case "note_delete":
		id, e := a.id("id")
		if e == nil && id == "" {
			e = a.missing("id")
		}
		if e != nil {
			return "", e, true
		}
		c := s.st.commentByID[id]
		if c == nil {
			return "", s.notFound("Comment", id), true
		}
		s.st.deleteComments(func(x *Comment) bool { return x == c })
		return "", nil, true
	}
	return "", nil, false
}

func (s *Server) noteAdd(a *cmdArgs) (string, *apiError) {
	c := Comment{}
	switch task, project := a.has("item_id"), a.has("project_id"); {
	case task && project:
		return "", s.newError(http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "A comment is on a task or a project, not both", map[string]any{"argument": "project_id"})
	case task:
		t, e := a.task("item_id", true)
		if e != nil {
			return "", e
		}
		c.TaskID = t.ID
	case project:
		p, e := a.project("project_id", true)
		if e != nil {
			return "", e
		}
		c.ProjectID = p.ID
	default:
		return "", a.missing("item_id")
	}
	content, e := a.required("content")
	if e != nil {
		return "", e
	}
	if utf8.RuneCountInString(content) > maxCommentContent {
		return "", a.invalid("content")
	}
	c.Content = content
	c.ID, c.PostedAt = s.newID(), s.now()
	s.st.addComment(&c)
	return c.ID, nil
}

// listComments serves GET /comments?task_id=|project_id=.
func (s *Server) listComments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	defer s.mu.Unlock()
	taskID, projectID := q.Get("task_id"), q.Get("project_id")
	switch {
	case taskID == "" && projectID == "":
		s.writeErrorLocked(w, http.StatusBadRequest, 19, "ARGUMENT_MISSING", "Required argument is missing", map[string]any{"argument": "task_id"})
		return
	case taskID != "" && projectID != "":
		s.writeErrorLocked(w, http.StatusBadRequest, 20, "INVALID_ARGUMENT_VALUE", "Exactly one of task_id or project_id is required", map[string]any{"argument": "project_id"})
		return
	case taskID != "" && s.st.taskByID[taskID] == nil:
		s.writeErrorLocked(w, http.StatusNotFound, 478, "NOT_FOUND", "Task not found", nil)
		return
	case projectID != "" && s.st.projectByID[projectID] == nil:
		s.writeErrorLocked(w, http.StatusNotFound, 478, "NOT_FOUND", "Project not found", nil)
		return
	}
	var sel []*Comment
	for _, c := range s.st.comments {
		if taskID != "" && c.TaskID == taskID || projectID != "" && c.ProjectID == projectID {
			sel = append(sel, c)
		}
	}
	lo, hi, next, ok := s.window(w, q, len(sel))
	if !ok {
		return
	}
	out := make([]commentJSON, 0, hi-lo)
	for _, c := range sel[lo:hi] {
		out = append(out, s.commentJSON(c))
	}
	writeJSON(w, http.StatusOK, pageJSON[commentJSON]{Results: out, NextCursor: next})
}

func (st *store) addComment(c *Comment) {
	st.comments = append(st.comments, c)
	st.commentByID[c.ID] = c
}

// deleteComments removes the comments del selects.
func (st *store) deleteComments(del func(*Comment) bool) {
	st.comments = slices.DeleteFunc(st.comments, func(c *Comment) bool {
		if del(c) {
			delete(st.commentByID, c.ID)
			return true
		}
		return false
	})
}

// Comments returns the comments on the task id (on every task and
// project when id is ""), oldest first.
func (s *Server) Comments(id string) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Comment
	for _, c := range s.st.comments {
		if id == "" || c.TaskID == id || c.ProjectID == id {
			out = append(out, *c)
		}
	}
	return out
}

// taskComments returns the comments of cs that are on a task.
func taskComments(cs []Comment) []Comment {
	return slices.DeleteFunc(slices.Clone(cs), func(c Comment) bool { return c.TaskID == "" })
}
