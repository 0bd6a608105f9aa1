package todoisttest

import (
	"net/http"
	"testing"
)

// The fields Doist's TypeScript SDK (@doist/todoist-sdk 11,
// Doist/todoist-sdk-typescript src/types/…) requires of each resource:
// the keys its zod schemas neither mark optional nor default. `make
// fakes-check` runs the SDK itself; this test keeps the fake honest
// where npm is not installed.
var sdkRequires = map[string][]string{
	// projects/types.ts BaseProjectSchema and PersonalProjectSchema.
	"project": {"id", "can_assign_tasks", "child_order", "color", "created_at", "is_archived", "is_deleted", "is_favorite",
		"is_frozen", "name", "updated_at", "view_style", "default_order", "description", "is_collapsed", "is_shared", "parent_id"},
	// sections/types.ts SectionBaseSchema.
	"section": {"id", "user_id", "project_id", "added_at", "updated_at", "archived_at", "name", "description",
		"section_order", "is_archived", "is_deleted", "is_collapsed"},
	// labels/types.ts LabelSchema (what sync/response.ts parses /sync
	// labels with too).
	"label": {"id", "order", "name", "color", "is_favorite"},
	// tasks/types.ts TaskSchema.
	"item": {"id", "user_id", "project_id", "section_id", "parent_id", "added_by_uid", "assigned_by_uid", "responsible_uid",
		"labels", "deadline", "duration", "checked", "is_deleted", "added_at", "completed_at", "updated_at", "due", "priority",
		"child_order", "content", "description", "day_order", "is_collapsed"},
	// users/types.ts CurrentUserSchema (GET /user).
	"user": {"id", "email", "full_name", "business_account_id", "is_premium", "premium_status", "date_format", "time_format",
		"weekly_goal", "daily_goal", "completed_count", "completed_today", "karma", "karma_trend", "lang", "next_week",
		"start_day", "start_page", "tz_info", "inbox_project_id", "days_off", "weekend_start_day"},
	// sync/resources/user.ts SyncUserSchema (the /sync user), besides
	// its FeaturesSchema and TzInfoSchema.
	"sync user": {"id", "email", "full_name", "activated_user", "auto_reminder", "business_account_id", "daily_goal",
		"date_format", "days_off", "feature_identifier", "features", "has_magic_number", "has_password", "image_id",
		"inbox_project_id", "is_celebrations_enabled", "is_premium", "joinable_workspace", "joined_at",
		"getting_started_guide_projects", "karma", "karma_trend", "lang", "next_week", "premium_status", "premium_until",
		"share_limit", "sort_order", "start_day", "start_page", "theme_id", "time_format", "tz_info", "unique_prefix",
		"verification_status", "websocket_url", "weekend_start_day", "weekly_goal"},
	"features": {"karma_disabled", "restriction", "karma_vacation", "beta", "has_push_reminders", "dateist_inline_disabled"},
	"tz_info":  {"timezone", "hours", "minutes", "is_dst", "gmt_string"},
	"note":     {"id", "content", "posted_at", "file_attachment", "posted_uid", "uids_to_notify", "reactions", "is_deleted"},
}

func requireKeys(t *testing.T, what string, v any) {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Errorf("%s: %T, want an object", what, v)
		return
	}
	for _, k := range sdkRequires[what] {
		if _, ok := m[k]; !ok {
			t.Errorf("%s lacks %s, which the SDK requires", what, k)
		}
	}
}

func TestResourcesHaveTheFieldsTheSDKRequires(t *testing.T) {
	s := New(t)
	p := s.AddProject(Project{Name: "Groceries"})
	x := s.AddSection(Section{ProjectID: p.ID, Name: "Dairy"})
	s.AddLabel(Label{Name: "errand"})
	task := s.AddTask(Task{Content: "Buy milk", ProjectID: p.ID, SectionID: x.ID, Labels: []string{"errand"}})

	_, u := call(t, s, http.MethodGet, "/user", "", "")
	requireKeys(t, "user", u)
	requireKeys(t, "tz_info", u["tz_info"])
	for path, what := range map[string]string{"/projects": "project", "/sections?project_id=" + p.ID: "section", "/labels": "label", "/tasks": "item"} {
		_, m := call(t, s, http.MethodGet, path, "", "")
		for _, r := range m["results"].([]any) {
			requireKeys(t, what, r)
		}
	}

	_, full := syncJSON(t, s, `{"sync_token":"*","resource_types":["projects","sections","labels","items","user"]}`)
	for res, what := range map[string]string{"projects": "project", "sections": "section", "labels": "label", "items": "item"} {
		for _, r := range full[res].([]any) {
			requireKeys(t, what, r)
		}
	}
	requireKeys(t, "sync user", full["user"])
	user, _ := full["user"].(map[string]any)
	requireKeys(t, "features", user["features"])
	requireKeys(t, "tz_info", user["tz_info"])

	// An incremental sync after a deletion: the SDK parses a deleted
	// object with its resource's schema, so it comes whole.
	st, _ := syncJSON(t, s, `{"commands":[{"type":"note_add","uuid":"n","temp_id":"tn","args":{"item_id":"`+task.ID+`","content":"by noon"}}]}`)
	if st != http.StatusOK {
		t.Fatalf("note_add: %d", st)
	}
	_, before := syncJSON(t, s, `{"sync_token":"*","resource_types":["projects","sections","items","notes"]}`)
	for _, n := range before["notes"].([]any) {
		requireKeys(t, "note", n)
	}
	notes := before["notes"].([]any)
	noteID := notes[len(notes)-1].(map[string]any)["id"].(string)
	st, _ = syncJSON(t, s, `{"commands":[{"type":"note_delete","uuid":"d0","args":{"id":"`+noteID+`"}},`+
		`{"type":"item_delete","uuid":"d1","args":{"id":"`+task.ID+`"}},`+
		`{"type":"section_delete","uuid":"d2","args":{"id":"`+x.ID+`"}},`+
		`{"type":"project_delete","uuid":"d3","args":{"id":"`+p.ID+`"}}]}`)
	if st != http.StatusOK {
		t.Fatalf("deletes: %d", st)
	}
	_, inc := syncJSON(t, s, `{"sync_token":"`+before["sync_token"].(string)+`","resource_types":["projects","sections","items","notes"]}`)
	for res, what := range map[string]string{"projects": "project", "sections": "section", "items": "item", "notes": "note"} {
		found := false
		for _, r := range inc[res].([]any) {
			if r.(map[string]any)["is_deleted"] == true {
				found = true
				requireKeys(t, what, r)
			}
		}
		if !found {
			t.Errorf("incremental %s: no deleted object", res)
		}
	}
}
