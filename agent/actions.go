package agent

import (
	"context"
	"encoding/json"
)

// The agent's actions: one Go struct per action of DESIGN §4. Their JSON
// Schemas are generated from these structs (see schema.go); names and
// argument names are a contract relied on from outside.

// Action names.
const (
	ActGetOverview   = "get_overview"
	ActGetProjects   = "get_projects"
	ActGetInboxTasks = "get_inbox_tasks"
	ActGetTasks      = "get_tasks"
	ActGetSections   = "get_sections"
	ActGetLabels     = "get_labels"
	ActCreateProject = "create_project"
	ActMoveTasks     = "move_tasks"
	ActAddTasks      = "add_tasks"
	ActUpdateTasks   = "update_tasks"
	ActCompleteTasks = "complete_tasks"
	ActDeleteTasks   = "delete_tasks"
	ActCreateSection = "create_section"
	ActAskUser       = "ask_user"
	ActFinalAnswer   = "final_answer"
	ActFailTask      = "fail_task"
)

// GetOverviewArgs are get_overview's arguments (none).
type GetOverviewArgs struct{}

// GetProjectsArgs are get_projects' arguments (none).
type GetProjectsArgs struct{}

// GetInboxTasksArgs are get_inbox_tasks' arguments (none).
type GetInboxTasksArgs struct{}

// GetTasksArgs are get_tasks' arguments.
type GetTasksArgs struct {
	ProjectID *string `json:"project_id,omitempty" jsonschema_description:"Only tasks of this project (an id from get_projects)."`
	Filter    *string `json:"filter,omitempty" jsonschema:"maxLength=1024" jsonschema_description:"A Todoist filter query, e.g. 'today | overdue', '#Work & p1', 'search: milk'."`
	Label     *string `json:"label,omitempty" jsonschema_description:"Only tasks with this label name."`
}

// GetSectionsArgs are get_sections' arguments.
type GetSectionsArgs struct {
	ProjectID string `json:"project_id" jsonschema:"minLength=1" jsonschema_description:"The project whose sections to list."`
}

// GetLabelsArgs are get_labels' arguments (none).
type GetLabelsArgs struct{}

// CreateProjectArgs are create_project's arguments.
type CreateProjectArgs struct {
	Name     string  `json:"name" jsonschema:"minLength=1,maxLength=120" jsonschema_description:"The new project's name. An existing project with this name (any case) is reused."`
	ParentID *string `json:"parent_id,omitempty" jsonschema_description:"Make it a sub-project of this project id."`
}

// Move is one task to move.
type Move struct {
	TaskID      string  `json:"task_id" jsonschema:"minLength=1" jsonschema_description:"The task to move."`
	ProjectID   *string `json:"project_id,omitempty" jsonschema_description:"Destination project id."`
	ProjectName *string `json:"project_name,omitempty" jsonschema:"maxLength=120" jsonschema_description:"Destination project by name, found case-insensitively or created. Use instead of project_id."`
	SectionID   *string `json:"section_id,omitempty" jsonschema_description:"Destination section id."`
}

// MoveGroup moves several tasks to one destination: the grouped form of
// Move, which names the destination once instead of once per task.
type MoveGroup struct {
	TaskIDs     []string `json:"task_ids" jsonschema:"minItems=1,maxItems=100"`
	ProjectID   *string  `json:"project_id,omitempty"`
	ProjectName *string  `json:"project_name,omitempty" jsonschema:"maxLength=120"`
	SectionID   *string  `json:"section_id,omitempty"`
}

// MoveTasksArgs are move_tasks' arguments: moves, groups or both (at
// least one task in all).
type MoveTasksArgs struct {
	Moves  []Move      `json:"moves,omitempty" jsonschema:"maxItems=100" jsonschema_description:"Tasks to move, one destination each."`
	Groups []MoveGroup `json:"groups,omitempty" jsonschema:"maxItems=10" jsonschema_description:"Tasks grouped by destination (fields as in moves): shorter when many go to one place."`
	// Plan and To are the filing form: one code per task of the last
	// inbox listing (see filing.go), turned into Groups before the call
	// is planned.
	Plan string   `json:"plan,omitempty" jsonschema:"maxLength=1100"`
	To   []string `json:"to,omitempty" jsonschema:"maxItems=9" jsonschema_description:"Project or section ids, or project names."`
}

// all returns every move, the groups' after the single moves, one per
// task, in order.
func (a *MoveTasksArgs) all() []Move {
	out := append([]Move(nil), a.Moves...)
	for _, g := range a.Groups {
		for _, id := range g.TaskIDs {
			out = append(out, Move{TaskID: id, ProjectID: g.ProjectID, ProjectName: g.ProjectName, SectionID: g.SectionID})
		}
	}
	return out
}

// NewTask is one task to add.
type NewTask struct {
	Content     string   `json:"content" jsonschema:"minLength=1,maxLength=500" jsonschema_description:"The task's title."`
	Description *string  `json:"description,omitempty" jsonschema_description:"Longer notes."`
	ProjectID   *string  `json:"project_id,omitempty" jsonschema_description:"Project id; the Inbox when missing."`
	SectionID   *string  `json:"section_id,omitempty" jsonschema_description:"Section id."`
	DueString   *string  `json:"due_string,omitempty" jsonschema:"maxLength=150" jsonschema_description:"Due date in words: 'tomorrow', 'every mon at 9'."`
	Priority    *string  `json:"priority,omitempty" jsonschema:"enum=p1,enum=p2,enum=p3,enum=p4" jsonschema_description:"p1 urgent … p4 none."`
	Labels      []string `json:"labels,omitempty" jsonschema_description:"Label names."`
}

// AddTasksArgs are add_tasks' arguments.
type AddTasksArgs struct {
	Tasks []NewTask `json:"tasks" jsonschema:"minItems=1,maxItems=100" jsonschema_description:"Every task to add, all in one call."`
}

// TaskUpdate is one task to change. Missing fields stay as they are.
type TaskUpdate struct {
	TaskID      string   `json:"task_id" jsonschema:"minLength=1" jsonschema_description:"The task to change."`
	Content     *string  `json:"content,omitempty" jsonschema:"minLength=1,maxLength=500" jsonschema_description:"New title."`
	Description *string  `json:"description,omitempty" jsonschema_description:"New notes."`
	DueString   *string  `json:"due_string,omitempty" jsonschema:"maxLength=150" jsonschema_description:"New due date in words; 'no date' removes it."`
	Priority    *string  `json:"priority,omitempty" jsonschema:"enum=p1,enum=p2,enum=p3,enum=p4" jsonschema_description:"p1 urgent … p4 none."`
	Labels      []string `json:"labels,omitempty" jsonschema_description:"The complete new list of label names (replaces the old list)."`
}

// UpdateTasksArgs are update_tasks' arguments.
type UpdateTasksArgs struct {
	Updates []TaskUpdate `json:"updates" jsonschema:"minItems=1,maxItems=100" jsonschema_description:"Every change, all in one call."`
}

// CompleteTasksArgs are complete_tasks' arguments.
type CompleteTasksArgs struct {
	TaskIDs []string `json:"task_ids" jsonschema:"minItems=1,maxItems=100" jsonschema_description:"Tasks to mark done."`
}

// DeleteTasksArgs are delete_tasks' arguments.
type DeleteTasksArgs struct {
	TaskIDs []string `json:"task_ids" jsonschema:"minItems=1,maxItems=100" jsonschema_description:"Tasks to delete for good."`
}

// CreateSectionArgs are create_section's arguments.
type CreateSectionArgs struct {
	ProjectID string `json:"project_id" jsonschema:"minLength=1" jsonschema_description:"The project to add the section to."`
	Name      string `json:"name" jsonschema:"minLength=1,maxLength=120" jsonschema_description:"The section's name."`
}

// AskUserArgs are ask_user's arguments.
type AskUserArgs struct {
	Question string   `json:"question" jsonschema:"minLength=1" jsonschema_description:"One short question for the user."`
	Options  []string `json:"options,omitempty" jsonschema:"maxItems=8" jsonschema_description:"Up to 8 short answers to offer as buttons."`
}

// FinalAnswerArgs are final_answer's arguments.
type FinalAnswerArgs struct {
	Answer string `json:"answer,omitempty" jsonschema_description:"The reply to the user: short, plain text, what was done."`
}

// FailTaskArgs are fail_task's arguments.
type FailTaskArgs struct {
	Reason string `json:"reason" jsonschema:"minLength=1" jsonschema_description:"Why the request cannot be done, for the user."`
}

// action is one action of the tool contract: a pointer to its argument
// struct. The struct generates the action's schema (see schema.go) and its
// methods say how it runs, so adding an action is one new type and one
// line in actionList. Every action is exactly one of reader, writer and
// controller (a test checks it); isAction marks the argument structs, so
// that nothing else passes for an action (newArgs takes only actions).
type action interface{ isAction() }

func (*GetOverviewArgs) isAction()   {}
func (*GetProjectsArgs) isAction()   {}
func (*GetInboxTasksArgs) isAction() {}
func (*GetTasksArgs) isAction()      {}
func (*GetSectionsArgs) isAction()   {}
func (*GetLabelsArgs) isAction()     {}
func (*CreateProjectArgs) isAction() {}
func (*MoveTasksArgs) isAction()     {}
func (*AddTasksArgs) isAction()      {}
func (*UpdateTasksArgs) isAction()   {}
func (*CompleteTasksArgs) isAction() {}
func (*DeleteTasksArgs) isAction()   {}
func (*CreateSectionArgs) isAction() {}
func (*AskUserArgs) isAction()       {}
func (*FinalAnswerArgs) isAction()   {}
func (*FailTaskArgs) isAction()      {}

// reader is an action that only reads. The reads of one reply run
// concurrently (see dispatch.go).
type reader interface {
	read(ctx context.Context, r *runner) readResult
}

// writer is an action that changes Todoist (see writes.go).
type writer interface {
	// plan turns the action into writes, each with its observation, its
	// summary for the journal and its inverse for undo. An id the run
	// knows to be wrong is rejected here, without an API call.
	plan(ctx context.Context, pl *planner) error
	// gate describes the action for its confirmation: the confirming
	// button's label and the question, naming the tasks.
	gate(ctx context.Context, pl *planner) (label, question string)
	// progress is the action's part of the progress line, from what was
	// applied ("" when nothing was).
	progress(t tally) string
}

// destructive marks a writer that waits for the user's yes under the
// "destructive" confirmation policy.
type destructive interface {
	writer
	destructive()
}

// controller is an action that ends the run or waits for the user (see
// engine.go).
type controller interface {
	control(ctx context.Context, r *runner, callID string) *Outcome
}

func (*DeleteTasksArgs) destructive() {}

// ender marks a controller that ends the run. It runs after the other
// calls of its reply, and only if they all succeeded.
type ender interface {
	controller
	ends()
}

func (*FinalAnswerArgs) ends() {}
func (*FailTaskArgs) ends()    {}

// actionDef names an action, says what it is for, and makes its
// arguments.
type actionDef struct {
	Name        string
	Description string
	New         func() action
}

// newArgs returns a constructor of an action's argument struct.
func newArgs[T any, P interface {
	*T
	action
}]() func() action {
	return func() action { return P(new(T)) }
}

// actionList lists every action, in the order shown to the model.
var actionList = []actionDef{
	{ActGetOverview, "Every project with its sections and open-task count, plus the inbox's tasks. Start here.", newArgs[GetOverviewArgs]()},
	{ActGetProjects, "List every project with its id.", newArgs[GetProjectsArgs]()},
	{ActGetInboxTasks, "List the tasks in the Inbox.", newArgs[GetInboxTasksArgs]()},
	{ActGetTasks, "List open tasks of a project, of a label, or matching a Todoist filter query.", newArgs[GetTasksArgs]()},
	{ActGetSections, "List the sections of a project.", newArgs[GetSectionsArgs]()},
	{ActGetLabels, "List the labels.", newArgs[GetLabelsArgs]()},
	{ActCreateProject, "Create a project, or return the existing one with that name.", newArgs[CreateProjectArgs]()},
	{ActMoveTasks, "Move tasks to projects or sections. project_name finds or creates the project in the same call. To file a listed inbox, plan has one digit per listed task in order (k: to's k-th entry, 0: leave it), a space after every ten.", newArgs[MoveTasksArgs]()},
	{ActAddTasks, "Add new tasks.", newArgs[AddTasksArgs]()},
	{ActUpdateTasks, "Change tasks' content, description, due date, priority or labels.", newArgs[UpdateTasksArgs]()},
	{ActCompleteTasks, "Mark tasks done (a recurring task moves to its next date).", newArgs[CompleteTasksArgs]()},
	{ActDeleteTasks, "Delete tasks for good. Cannot be undone; prefer complete_tasks.", newArgs[DeleteTasksArgs]()},
	{ActCreateSection, "Create a section in a project.", newArgs[CreateSectionArgs]()},
	{ActAddComments, "Add comments to tasks.", newArgs[AddCommentsArgs]()},
	{ActAskUser, "Ask the user a question when you cannot proceed without their answer. The run pauses until they reply.", newArgs[AskUserArgs]()},
	{ActFinalAnswer, "Finish with the reply to the user. After writes answer may be left out: tidybot reports them.", newArgs[FinalAnswerArgs]()},
	{ActFailTask, "Give up with a reason when the request cannot be done.", newArgs[FailTaskArgs]()},
}

// actionByName finds an action's definition.
func actionByName(name string) (actionDef, bool) {
	for _, d := range actionList {
		if d.Name == name {
			return d, true
		}
	}
	return actionDef{}, false
}

// decode returns a call's action with its arguments, which were checked
// against the schema when the call was parsed. It reports false for a
// name that is not an action (a transcript from another version).
func decode(c call) (action, bool) {
	d, ok := actionByName(c.Name)
	if !ok {
		return nil, false
	}
	a := d.New()
	if len(c.Args) > 0 {
		if err := json.Unmarshal(c.Args, a); err != nil {
			return nil, false
		}
	}
	return a, true
}

// ActionNames returns every action name, in order.
func ActionNames() []string {
	names := make([]string, len(actionList))
	for i, d := range actionList {
		names[i] = d.Name
	}
	return names
}

// IsWrite reports whether the action named name changes Todoist; false
// for a name that is not an action.
func IsWrite(name string) bool {
	d, ok := actionByName(name)
	if !ok {
		return false
	}
	_, w := d.New().(writer)
	return w
}
