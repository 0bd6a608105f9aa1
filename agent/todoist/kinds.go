package todoist

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tidybot/tidybot/agent"
)

// kind is everything the client knows about one kind of write: one row
// of kinds. The /sync command's type is the kind itself (agent.AddTask is
// "item_add"). Adding a kind of write is adding a row; validate,
// toCommand, describe, findCreated, missingObject, Scopes and the scope
// error read it, and nothing else switches on a kind.
type kind struct {
	// id names what Write.ID refers to ("task", "project", …), which the
	// write then requires; "" for a write without an ID (most creates).
	id string
	// verb says what the write did, for people: "moved", "created
	// project" (see Verb).
	verb string
	// scope is the OAuth scope the command needs (see Scopes); action
	// words what a token without it is refused ("delete a task"), ""
	// for "change your Todoist".
	scope, action string
	// check validates the write's other fields before anything is sent;
	// nil when there are none.
	check func(bad badf, w agent.Write) error
	// args are the command's args; nil for {"id": ID}.
	args func(w agent.Write) map[string]any
	// describe names the write for a message; nil for
	// `<kind> of <id kind> <ID>`.
	describe func(w agent.Write) string
	// find lists what a create may have made, to find the object of a
	// create that Todoist reports done without its new id. It is set
	// exactly for the kinds that create (and so carry a TempID).
	find func(ctx context.Context, c *Client, w agent.Write) ([]candidate, error)
	// missing is what a not-found error is about when the error does not
	// say; nil for the ID, as the id kind.
	missing func(w agent.Write) (kind, id string)
}

// badf reports a write that fails validation.
type badf = func(format string, args ...any) error

// The OAuth scopes writes need (see kinds for the sources).
const (
	scopeWrite         = "data:read_write"
	scopeDelete        = "data:delete"
	scopeDeleteProject = "project:delete"
)

// kinds is the table of write kinds. Scopes are from the official SDKs
// (Doist/todoist-api-typescript src/authentication.ts PERMISSIONS;
// Doist/todoist-api-python todoist_api_python/authentication.py):
// data:read_write reads and writes, data:delete deletes (tasks, labels,
// filters; sections too, as the fake holds), and a project is deleted
// only with project:delete, which /undo of a created project needs.
var kinds = map[agent.WriteKind]kind{
	agent.AddProject: {verb: "created project", scope: scopeWrite, args: projectArgs, describe: describeName, find: findProject,
		check: func(bad badf, w agent.Write) error {
			return checkName(bad, "project", w.Name, maxProjectName)
		},
		missing: func(w agent.Write) (string, string) { return "project", w.ParentID }},
	agent.AddSection: {verb: "created section", scope: scopeWrite, args: sectionArgs, describe: describeName, find: findSection, check: checkSection, missing: containerOf},
	agent.AddLabel: {verb: "created label", scope: scopeWrite, describe: describeName, find: findLabel,
		args: func(w agent.Write) map[string]any { return map[string]any{"name": strings.TrimSpace(w.Name)} },
		check: func(bad badf, w agent.Write) error {
			return checkName(bad, "label", w.Name, maxLabelName)
		}},
	agent.AddTask: {verb: "added", scope: scopeWrite, args: addTaskArgs, describe: describeContent, find: findTask, missing: containerOf,
		check: func(bad badf, w agent.Write) error {
			if w.Content == nil {
				return bad("the task content is empty; give each task a title")
			}
			return checkTask(bad, w)
		}},
	agent.UpdateTask: {verb: "updated", id: "task", scope: scopeWrite, check: checkTask,
		args: func(w agent.Write) map[string]any {
			args := map[string]any{"id": w.ID}
			taskArgs(args, w, true)
			return args
		}},
	agent.MoveTask: {verb: "moved", id: "task", scope: scopeWrite, args: moveArgs,
		check: func(bad badf, w agent.Write) error {
			if (w.ProjectID == "") == (w.SectionID == "") {
				return bad("a move needs exactly one destination, a project id or a section id")
			}
			return nil
		}},
	agent.CloseTask:         {verb: "completed", id: "task", scope: scopeWrite},
	agent.ReopenTask:        {verb: "reopened", id: "task", scope: scopeWrite},
	agent.RestoreOccurrence: {verb: "restored", id: "task", scope: scopeWrite, args: restoreArgs, check: checkRestore},
	agent.DeleteTask:        {verb: "deleted", id: "task", scope: scopeDelete, action: "delete a task"},
	agent.DeleteProject:     {verb: "deleted project", id: "project", scope: scopeDeleteProject, action: "delete a project"},
	agent.DeleteSection:     {verb: "deleted section", id: "section", scope: scopeDelete, action: "delete a section"},
	// Comments are "notes" on /sync: note_add takes item_id (the task)
	// and content, and as a create a temp_id that temp_id_mapping maps to
	// the new comment's id; note_delete takes the comment's id
	// (developer.todoist.com/api/v1 #tag/Sync, command note_add;
	// Doist/todoist-api-typescript src/types/sync/commands/notes.ts
	// NoteAddArgs, NoteDeleteArgs).
	agent.AddComment: {verb: "commented on", id: "task", scope: scopeWrite, find: findComment,
		args: func(w agent.Write) map[string]any {
			args := map[string]any{"item_id": w.ID}
			if w.Content != nil {
				args["content"] = *w.Content
			}
			return args
		},
		check: func(bad badf, w agent.Write) error {
			switch {
			case w.Content == nil || strings.TrimSpace(*w.Content) == "":
				return bad("the comment is empty")
			case utf8.RuneCountInString(*w.Content) > maxComment:
				return bad("the comment is longer than %d characters", maxComment)
			}
			return nil
		},
		describe: func(w agent.Write) string { return fmt.Sprintf("%s on task %s", w.Kind, w.ID) }},
	agent.DeleteComment: {verb: "deleted comment", id: "comment", scope: scopeDelete, action: "delete a comment"},
}

// Verb says what a write of kind k did, in words for people ("moved",
// "created project"); the kind itself for one the client does not know.
func Verb(k agent.WriteKind) string {
	if v := kinds[k].verb; v != "" {
		return v
	}
	return string(k)
}

// isCreate reports whether a kind creates an object (and so has a
// TempID and a NewID).
func isCreate(k agent.WriteKind) bool { return kinds[k].find != nil }

// idKind says what a write's ID names: "task" where the kind does not
// say.
func idKind(k agent.WriteKind) string {
	if id := kinds[k].id; id != "" {
		return id
	}
	return "task"
}

// toCommand encodes a write as a /sync command.
func toCommand(w agent.Write) command {
	var args map[string]any
	if f := kinds[w.Kind].args; f != nil {
		args = f(w)
	} else {
		args = map[string]any{"id": w.ID}
	}
	return command{Type: string(w.Kind), UUID: w.UUID, TempID: w.TempID, Args: args}
}

// describe names a write for a message: `item_move of task X`,
// `project_add "Garden"`.
func describe(w agent.Write) string {
	if f := kinds[w.Kind].describe; f != nil {
		if s := f(w); s != "" {
			return s
		}
	}
	return fmt.Sprintf("%s of %s %s", w.Kind, idKind(w.Kind), w.ID)
}

func describeName(w agent.Write) string { return fmt.Sprintf("%s %q", w.Kind, w.Name) }

func describeContent(w agent.Write) string {
	if w.Content == nil {
		return ""
	}
	return fmt.Sprintf("%s %q", w.Kind, *w.Content)
}

// containerOf is what a not-found error of a create in a project or
// section is about: its section, else its project.
func containerOf(w agent.Write) (string, string) {
	if w.SectionID != "" {
		return "section", w.SectionID
	}
	return "project", w.ProjectID
}

func projectArgs(w agent.Write) map[string]any {
	args := map[string]any{"name": strings.TrimSpace(w.Name)}
	if w.ParentID != "" {
		args["parent_id"] = w.ParentID
	}
	return args
}

func sectionArgs(w agent.Write) map[string]any {
	return map[string]any{"name": strings.TrimSpace(w.Name), "project_id": w.ProjectID}
}

func checkSection(bad badf, w agent.Write) error {
	if err := checkName(bad, "section", w.Name, maxSectionName); err != nil {
		return err
	}
	if strings.TrimSpace(w.ProjectID) == "" {
		return bad("empty project id: a section belongs to a project")
	}
	return nil
}

func addTaskArgs(w agent.Write) map[string]any {
	args := make(map[string]any, 6)
	if w.ProjectID != "" {
		args["project_id"] = w.ProjectID
	}
	if w.SectionID != "" {
		args["section_id"] = w.SectionID
	}
	taskArgs(args, w, false)
	return args
}

func moveArgs(w agent.Write) map[string]any {
	args := map[string]any{"id": w.ID}
	if w.ProjectID != "" {
		args["project_id"] = w.ProjectID
	} else {
		args["section_id"] = w.SectionID
	}
	return args
}

// restoreArgs: is_forward 0 is "uncompletion (e.g., via undo)"
// (developer.todoist.com/api/v1 #tag/Sync/Tasks/Complete-a-recurring-task).
func restoreArgs(w agent.Write) map[string]any {
	return map[string]any{"id": w.ID, "due": dueArg(w.Due), "is_forward": 0}
}

func checkRestore(bad badf, w agent.Write) error {
	if w.Due == nil {
		return bad("the occurrence to go back to is missing")
	}
	return checkDue(bad, w.Due)
}
