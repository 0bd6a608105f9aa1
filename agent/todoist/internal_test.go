package todoist

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent"
)

func TestPriorityMapping(t *testing.T) {
	tests := []struct {
		p   agent.Priority
		api int
	}{{agent.P1, 4}, {agent.P2, 3}, {agent.P3, 2}, {agent.P4, 1}}
	for _, tt := range tests {
		got, ok := apiPriority(tt.p)
		if !ok || got != tt.api {
			t.Errorf("apiPriority(%s) = %d, %v; want %d", tt.p, got, ok, tt.api)
		}
		if back := fromAPIPriority(tt.api); back != tt.p {
			t.Errorf("fromAPIPriority(%d) = %s, want %s", tt.api, back, tt.p)
		}
	}
	for _, bad := range []agent.Priority{"", "p0", "p5", "P1", "high"} {
		if _, ok := apiPriority(bad); ok {
			t.Errorf("apiPriority(%q) ok", bad)
		}
	}
	if got := fromAPIPriority(0); got != agent.P4 {
		t.Errorf("fromAPIPriority(0) = %s, want p4", got)
	}
}

func TestBackoff(t *testing.T) {
	c := New("t", "", nil, WithBackoff(100*time.Millisecond, time.Second))
	for n := range 40 {
		hi := min(100*time.Millisecond<<min(n, 20), time.Second)
		for range 20 {
			if d := c.backoff(n); d < hi/2 || d > hi {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", n, d, hi/2, hi)
			}
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 5, 20, 12, 0, 0, 0, time.UTC)
	body := &apiError{ErrorExtra: map[string]any{"retry_after": 2.5}}
	tests := []struct {
		name   string
		header string
		ae     *apiError
		want   time.Duration
		wantOK bool
	}{
		{"seconds", "7", body, 7 * time.Second, true},
		{"http date", now.Add(90 * time.Second).Format(http.TimeFormat), nil, 90 * time.Second, true},
		{"body", "", body, 2500 * time.Millisecond, true},
		{"garbage header falls back to the body", "soon", body, 2500 * time.Millisecond, true},
		{"zero header: at once (retry.After's one rule)", "0", body, 0, true},
		{"fractional header", "1.5", body, 1500 * time.Millisecond, true},
		{"nothing", "", &apiError{}, 0, false},
	}
	for _, tt := range tests {
		got, ok := retryAfter(http.Header{"Retry-After": {tt.header}}, tt.ae, now)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("%s: %v, %v; want %v, %v", tt.name, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestToCommand(t *testing.T) {
	s := func(v string) *string { return &v }
	tests := []struct {
		name  string
		write agent.Write
		want  string
	}{
		{"add", agent.Write{Kind: agent.AddTask, UUID: "u", TempID: "t", Content: s(" Buy milk "), ProjectID: "p", DueString: s("tomorrow"), Priority: agent.P1, Labels: &[]string{"errand"}},
			`{"type":"item_add","uuid":"u","temp_id":"t","args":{"content":"Buy milk","due":{"string":"tomorrow"},"labels":["errand"],"priority":4,"project_id":"p"}}`},
		{"add with no date", agent.Write{Kind: agent.AddTask, UUID: "u", Content: s("x"), DueString: s("no date")},
			`{"type":"item_add","uuid":"u","args":{"content":"x"}}`},
		{"update clears due and labels", agent.Write{Kind: agent.UpdateTask, UUID: "u", ID: "i", DueString: s("No Date"), Labels: &[]string{}},
			`{"type":"item_update","uuid":"u","args":{"due":null,"id":"i","labels":[]}}`},
		{"update leaves nil fields out", agent.Write{Kind: agent.UpdateTask, UUID: "u", ID: "i", Priority: agent.P4},
			`{"type":"item_update","uuid":"u","args":{"id":"i","priority":1}}`},
		{"move to section", agent.Write{Kind: agent.MoveTask, UUID: "u", ID: "i", SectionID: "s"},
			`{"type":"item_move","uuid":"u","args":{"id":"i","section_id":"s"}}`},
		{"project with parent", agent.Write{Kind: agent.AddProject, UUID: "u", TempID: "t", Name: "P", ParentID: "x"},
			`{"type":"project_add","uuid":"u","temp_id":"t","args":{"name":"P","parent_id":"x"}}`},
		{"reopen", agent.Write{Kind: agent.ReopenTask, UUID: "u", ID: "i"},
			`{"type":"item_uncomplete","uuid":"u","args":{"id":"i"}}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(toCommand(tt.write))
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, b, tt.want)
		}
	}
}

func TestCommandError(t *testing.T) {
	declared := map[string]int{"tmp-p": 0}
	tests := []struct {
		name     string
		write    agent.Write
		ae       apiError
		wantCode agent.ErrorCode
		wantMsg  string
	}{
		{"task not found", agent.Write{Kind: agent.CloseTask, ID: "X"},
			apiError{Message: "Task not found", Tag: "NOT_FOUND", HTTPCode: 404}, agent.ErrNotFound, "no task with id X"},
		{"v9-style item not found", agent.Write{Kind: agent.MoveTask, ID: "X", ProjectID: "P"},
			apiError{Message: "Item not found", Code: 22, HTTPCode: 404}, agent.ErrNotFound, "no task with id X"},
		{"move to a missing project", agent.Write{Kind: agent.MoveTask, ID: "X", ProjectID: "P"},
			apiError{Message: "Project not found", Tag: "NOT_FOUND", HTTPCode: 404}, agent.ErrNotFound, "no project with id P"},
		{"delete a missing project", agent.Write{Kind: agent.DeleteProject, ID: "P"},
			apiError{Message: "Project not found", HTTPCode: 404}, agent.ErrNotFound, "no project with id P"},
		{"add to a missing section", agent.Write{Kind: agent.AddTask, SectionID: "S"},
			apiError{Message: "Section not found", HTTPCode: 404}, agent.ErrNotFound, "no section with id S"},
		{"invalid temp id", agent.Write{Kind: agent.MoveTask, ID: "6X7rM8997g3RQmvh", ProjectID: "tmp-p"},
			apiError{Message: "Invalid temporary id", Code: 15, HTTPCode: 400}, agent.ErrNotFound, "no project with id tmp-p"},
		{"invalid temp id named by the server", agent.Write{Kind: agent.MoveTask, ID: "bogus", SectionID: "S"},
			apiError{Message: "Invalid temporary id", Code: 15, ErrorExtra: map[string]any{"argument": "section_id"}}, agent.ErrNotFound, "no section with id S"},
		{"plan limit", agent.Write{Kind: agent.AddProject, Name: "P"},
			apiError{Message: "Maximum number of projects reached", Tag: "MAX_PROJECTS_LIMIT_REACHED", HTTPCode: 403}, agent.ErrPlanLimit,
			"the Todoist plan's limit is reached (Maximum number of projects reached); delete or archive something first, or upgrade the plan"},
		{"forbidden", agent.Write{Kind: agent.DeleteProject, ID: "P"},
			apiError{Message: "Access denied", HTTPCode: 403}, agent.ErrForbidden, "Todoist does not allow project_delete of project P (Access denied)"},
		{"bad argument", agent.Write{Kind: agent.UpdateTask, ID: "X"},
			apiError{Message: "Invalid argument value", Tag: "INVALID_ARGUMENT_VALUE", HTTPCode: 400, ErrorExtra: map[string]any{"argument": "due"}}, agent.ErrInvalid,
			"Todoist rejected item_update of task X: Invalid argument value (argument due)"},
		{"server", agent.Write{Kind: agent.CloseTask, ID: "X"},
			apiError{Message: "oops", HTTPCode: 500}, agent.ErrServer, "Todoist failed on item_close of task X; re-sending the same batch is safe"},
		// A command error may carry only some fields; the tag names the
		// kind of what is missing (developer.todoist.com/api/v1
		// #tag/Sync/Overview, "Response / Error").
		{"tag only: missing task", agent.Write{Kind: agent.MoveTask, ID: "X", ProjectID: "P"},
			apiError{Message: "Not found", Tag: "ITEM_NOT_FOUND"}, agent.ErrNotFound, "no task with id X"},
		{"tag only: missing project", agent.Write{Kind: agent.MoveTask, ID: "X", ProjectID: "P"},
			apiError{Message: "Not found", Tag: "PROJECT_NOT_FOUND"}, agent.ErrNotFound, "no project with id P"},
		{"tag only: missing section", agent.Write{Kind: agent.AddTask, ProjectID: "P", SectionID: "S"},
			apiError{Tag: "SECTION_NOT_FOUND"}, agent.ErrNotFound, "no section with id S"},
		{"tag beats the message's words", agent.Write{Kind: agent.MoveTask, ID: "X", ProjectID: "P"},
			apiError{Message: "Item cannot be moved", Tag: "PROJECT_NOT_FOUND", HTTPCode: 404}, agent.ErrNotFound, "no project with id P"},
		{"tag only: invalid temp id", agent.Write{Kind: agent.MoveTask, ID: "6X7rM8997g3RQmvh", ProjectID: "tmp-p"},
			apiError{Message: "Invalid temporary id", Tag: "INVALID_TEMP_ID"}, agent.ErrNotFound, "no project with id tmp-p"},
		{"tag only: plan limit", agent.Write{Kind: agent.AddProject, Name: "P"},
			apiError{Message: "Maximum number of projects reached", Tag: "MAX_PROJECTS_LIMIT_REACHED"}, agent.ErrPlanLimit,
			"the Todoist plan's limit is reached (Maximum number of projects reached); delete or archive something first, or upgrade the plan"},
		{"tag only: rate limited", agent.Write{Kind: agent.CloseTask, ID: "X"},
			apiError{Message: "Too many requests", Tag: "LIMITS_REACHED"}, agent.ErrRateLimited, "Todoist's rate limit is reached; re-send this write later"},
		{"rate limited", agent.Write{Kind: agent.CloseTask, ID: "X"},
			apiError{Message: "Too many requests", Tag: "LIMITS_REACHED", HTTPCode: 429}, agent.ErrRateLimited, "Todoist's rate limit is reached; re-send this write later"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := commandError(tt.write, &tt.ae, declared)
			if e.Code != tt.wantCode || e.Message != tt.wantMsg {
				t.Errorf("got %s %q, want %s %q", e.Code, e.Message, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestParseAPIError(t *testing.T) {
	ae := parseAPIError(410, []byte("This endpoint is deprecated.\nmore"))
	if ae.Message != "This endpoint is deprecated." || ae.HTTPCode != 410 {
		t.Errorf("plain text: %+v", ae)
	}
	ae = parseAPIError(404, []byte(`{"error":"Task not found","error_code":478,"error_tag":"NOT_FOUND","http_code":404,"error_extra":{"event_id":"x"}}`))
	if ae.Tag != "NOT_FOUND" || ae.Code != 478 || ae.Error() != "todoist HTTP 404 NOT_FOUND (478): Task not found" {
		t.Errorf("json: %+v %q", ae, ae.Error())
	}
}

// TestKindsTable: every kind of write has words for people and names the
// scope it needs, one of those asked for at /connect, and every create can
// be found again.
func TestKindsTable(t *testing.T) {
	want := []string{"data:delete", "data:read_write", "project:delete"}
	if fmt.Sprint(Scopes) != fmt.Sprint(want) {
		t.Errorf("Scopes = %v, want %v", Scopes, want)
	}
	for k, row := range kinds {
		if row.verb == "" || Verb(k) != row.verb {
			t.Errorf("%s: no verb for people", k)
		}
		if !slices.Contains(Scopes, row.scope) {
			t.Errorf("%s: scope %q is not among Scopes %v", k, row.scope, Scopes)
		}
		if cmd := toCommand(agent.Write{Kind: k, UUID: "u", ID: "x", Due: &agent.Due{Date: "2026-05-20"}}); cmd.Type != string(k) || cmd.Args == nil {
			t.Errorf("%s: command %+v, want type %s with args", k, cmd, k)
		}
	}
	for _, k := range []agent.WriteKind{agent.AddProject, agent.AddSection, agent.AddLabel, agent.AddTask} {
		if !isCreate(k) {
			t.Errorf("%s is not a create", k)
		}
	}
}
