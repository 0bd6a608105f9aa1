package todoisttest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"
)

// call sends a request to the fake and decodes the JSON answer.
func call(t *testing.T, s *Server, method, path, contentType, body string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, s.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		m = map[string]any{"_text": string(raw)}
	}
	return resp.StatusCode, m
}

func syncJSON(t *testing.T, s *Server, body string) (int, map[string]any) {
	t.Helper()
	return call(t, s, http.MethodPost, "/sync", "application/json", body)
}

var idRE = regexp.MustCompile(`^[0-9A-Za-z]{16}$`)

func TestAuthAndErrorShape(t *testing.T) {
	s := New(t)
	for _, auth := range []string{"", "Bearer wrong", "Token " + s.Token} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/projects", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("auth %q: status %d, want 401", auth, resp.StatusCode)
		}
		for _, k := range []string{"error", "error_code", "error_tag", "http_code", "error_extra"} {
			if _, ok := e[k]; !ok {
				t.Errorf("auth %q: error body %v lacks %q", auth, e, k)
			}
		}
	}
}

func TestRetiredPaths(t *testing.T) {
	s := New(t)
	base := strings.TrimSuffix(s.URL, "/api/v1")
	for _, p := range []string{"/rest/v2/tasks", "/rest/v2/projects/123", "/sync/v9/sync"} {
		resp, err := s.Client().Post(base+p, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusGone || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("%s: %d %q, want 410 text/plain", p, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if !strings.Contains(string(body), "deprecated") {
			t.Errorf("%s: body %q", p, body)
		}
		if got := s.Requests(p); got != 1 {
			t.Errorf("Requests(%q) = %d, want 1", p, got)
		}
	}
}

func TestInboxAndIDs(t *testing.T) {
	s := New(t)
	work := s.AddProject(Project{Name: "Work"})
	l := s.AddLabel(Label{Name: "errand"})
	_, m := call(t, s, http.MethodGet, "/projects", "", "")
	res := m["results"].([]any)
	if len(res) != 2 {
		t.Fatalf("got %d projects, want 2", len(res))
	}
	inbox := res[0].(map[string]any)
	if inbox["inbox_project"] != true || inbox["name"] != "Inbox" || inbox["id"] != s.InboxID() {
		t.Errorf("first project %v, want the Inbox", inbox)
	}
	for _, id := range []string{s.InboxID(), work.ID} {
		if !idRE.MatchString(id) {
			t.Errorf("id %q is not 16 alphanumerics", id)
		}
	}
	if !regexp.MustCompile(`^\d{10}$`).MatchString(l.ID) {
		t.Errorf("label id %q is not numeric", l.ID)
	}
	_, u := call(t, s, http.MethodGet, "/user", "", "")
	if u["inbox_project_id"] != s.InboxID() {
		t.Errorf("user inbox_project_id %v, want %s", u["inbox_project_id"], s.InboxID())
	}
	st, p := call(t, s, http.MethodGet, "/projects/"+work.ID, "", "")
	if st != 200 || p["name"] != "Work" || p["is_shared"] != false {
		t.Errorf("GET /projects/{id}: %d %v", st, p)
	}
	if st, e := call(t, s, http.MethodGet, "/projects/AAAAAAAAAAAAAAAA", "", ""); st != 404 || e["error_tag"] != "NOT_FOUND" {
		t.Errorf("unknown project: %d %v", st, e)
	}
}

func TestPagination(t *testing.T) {
	s := New(t)
	s.SeedInbox(120, 3)
	tests := []struct {
		name       string
		query      string
		wantStatus int
		wantPages  []int
	}{
		{"default limit is 50", "", 200, []int{50, 50, 20}},
		{"limit 200", "limit=200", 200, []int{120}},
		{"limit 7 with a filter param that is ignored", "limit=100&filter=p1", 200, []int{100, 20}},
		{"limit above 200", "limit=201", 400, nil},
		{"limit 0", "limit=0", 400, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var pages []int
			q := tt.query
			for {
				st, m := call(t, s, http.MethodGet, "/tasks?"+q, "", "")
				if st != tt.wantStatus {
					t.Fatalf("status %d, want %d: %v", st, tt.wantStatus, m)
				}
				if st != 200 {
					if m["error_tag"] != "INVALID_ARGUMENT_VALUE" {
						t.Errorf("error %v", m)
					}
					return
				}
				pages = append(pages, len(m["results"].([]any)))
				next, _ := m["next_cursor"].(string)
				if next == "" {
					if m["next_cursor"] != nil {
						t.Errorf("next_cursor %v, want null", m["next_cursor"])
					}
					break
				}
				v, _ := url.ParseQuery(tt.query)
				v.Set("cursor", next)
				q = v.Encode()
			}
			if !reflect.DeepEqual(pages, tt.wantPages) {
				t.Errorf("pages %v, want %v", pages, tt.wantPages)
			}
		})
	}
	t.Run("cursor is tied to the parameters", func(t *testing.T) {
		_, m := call(t, s, http.MethodGet, "/tasks", "", "")
		next := m["next_cursor"].(string)
		st, e := call(t, s, http.MethodGet, "/tasks?project_id="+s.InboxID()+"&cursor="+url.QueryEscape(next), "", "")
		if st != 400 {
			t.Errorf("cursor with other params: %d %v, want 400", st, e)
		}
		if st, _ := call(t, s, http.MethodGet, "/tasks?cursor=garbage", "", ""); st != 400 {
			t.Errorf("garbage cursor: %d, want 400", st)
		}
	})
}

func TestTaskQueries(t *testing.T) {
	s := New(t)
	p := s.AddProject(Project{Name: "Home"})
	sec := s.AddSection(Section{ProjectID: p.ID, Name: "Kitchen"})
	a := s.AddTask(Task{Content: "a", ProjectID: p.ID, Labels: []string{"Errand"}})
	b := s.AddTask(Task{Content: "b", SectionID: sec.ID})
	c := s.AddTask(Task{Content: "c"})
	tests := []struct {
		query string
		want  []string
	}{
		{"project_id=" + p.ID, []string{a.ID, b.ID}},
		{"section_id=" + sec.ID, []string{b.ID}},
		{"label=errand", []string{a.ID}},
		{"ids=" + a.ID + "," + c.ID + ",AAAAAAAAAAAAAAAA", []string{a.ID, c.ID}},
		{"", []string{a.ID, b.ID, c.ID}},
	}
	for _, tt := range tests {
		_, m := call(t, s, http.MethodGet, "/tasks?"+tt.query, "", "")
		if got := resultIDs(m); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("/tasks?%s = %v, want %v", tt.query, got, tt.want)
		}
	}
	if st, _ := call(t, s, http.MethodGet, "/tasks/"+b.ID, "", ""); st != 200 {
		t.Errorf("GET /tasks/{id}: %d", st)
	}
	if st, e := call(t, s, http.MethodGet, "/tasks?project_id=AAAAAAAAAAAAAAAA", "", ""); st != 404 {
		t.Errorf("unknown project: %d %v, want 404", st, e)
	}
	_, m := call(t, s, http.MethodGet, "/sections?project_id="+p.ID, "", "")
	if got := resultIDs(m); !reflect.DeepEqual(got, []string{sec.ID}) {
		t.Errorf("sections %v", got)
	}
}

func resultIDs(m map[string]any) []string {
	var ids []string
	res, _ := m["results"].([]any)
	for _, r := range res {
		ids = append(ids, r.(map[string]any)["id"].(string))
	}
	return ids
}

func TestFilter(t *testing.T) {
	now := time.Date(2026, 5, 20, 9, 0, 0, 0, time.UTC) // a Wednesday
	s := New(t, WithClock(func() time.Time { return now }))
	work := s.AddProject(Project{Name: "Work"})
	sub := s.AddProject(Project{Name: "Talks", ParentID: work.ID})
	sec := s.AddSection(Section{ProjectID: work.ID, Name: "Admin"})
	tasks := map[string]Task{
		"today":   s.AddTask(Task{Content: "Pay rent", Due: &Due{String: "today"}, Priority: 4}),
		"over":    s.AddTask(Task{Content: "Call mum", Due: &Due{Date: "2026-05-18"}, Labels: []string{"phone"}}),
		"tom":     s.AddTask(Task{Content: "Slides", ProjectID: sub.ID, Due: &Due{String: "tomorrow"}}),
		"nodate":  s.AddTask(Task{Content: "Read book", ProjectID: work.ID, Priority: 2}),
		"section": s.AddTask(Task{Content: "Expense report", SectionID: sec.ID, Labels: []string{"office"}}),
		"weekly":  s.AddTask(Task{Content: "Water plants", Due: &Due{String: "every mon"}}),
	}
	names := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			for k, t := range tasks {
				if t.ID == id {
					out = append(out, k)
				}
			}
		}
		return out
	}
	tests := []struct {
		query string
		want  []string
	}{
		{"today", []string{"today"}},
		{"overdue", []string{"over"}},
		{"today | overdue", []string{"today", "over"}},
		{"no date", []string{"nodate", "section"}},
		{"p1", []string{"today"}},
		{"p3", []string{"nodate"}},
		{"#Work", []string{"nodate", "section"}},
		{"##work", []string{"tom", "nodate", "section"}},
		{"/Admin", []string{"section"}},
		{"@phone", []string{"over"}},
		{"@off*", []string{"section"}},
		{"no labels & #Work", []string{"nodate"}},
		{"search: SLIDES", []string{"tom"}},
		{"!no date & !recurring", []string{"today", "over", "tom"}},
		{"(#Work | #Talks) & !/Admin", []string{"tom", "nodate"}},
		{"tomorrow", []string{"tom"}},
		{"7 days", []string{"today", "tom", "weekly"}},
		{"recurring", []string{"weekly"}},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			st, m := call(t, s, http.MethodGet, "/tasks/filter?query="+url.QueryEscape(tt.query), "", "")
			if st != 200 {
				t.Fatalf("status %d: %v", st, m)
			}
			if got := names(resultIDs(m)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"due before: friday", "today,overdue", "(today", "today &", "#Work )"} {
		st, m := call(t, s, http.MethodGet, "/tasks/filter?query="+url.QueryEscape(bad), "", "")
		if st != 400 || m["error_tag"] != "INVALID_SEARCH_QUERY" {
			t.Errorf("%q: %d %v, want 400 INVALID_SEARCH_QUERY", bad, st, m)
		}
	}
}

func TestParseDueString(t *testing.T) {
	now := time.Date(2026, 5, 20, 9, 0, 0, 0, time.UTC) // a Wednesday
	tests := []struct {
		in        string
		wantDate  string
		recurring bool
	}{
		{"today", "2026-05-20", false},
		{"Tomorrow", "2026-05-21", false},
		{"friday", "2026-05-22", false},
		{"next monday", "2026-05-25", false},
		{"next week", "2026-05-25", false},
		{"in 3 days", "2026-05-23", false},
		{"May 30", "2026-05-30", false},
		{"2 Jan", "2027-01-02", false},
		{"2026-06-01", "2026-06-01", false},
		{"tomorrow at 5pm", "2026-05-21T17:00:00", false},
		{"17:30", "2026-05-20T17:30:00", false},
		{"every day", "2026-05-20", true},
		{"every mon", "2026-05-25", true},
		{"every weekday at 9am", "2026-05-20T09:00:00", true},
	}
	for _, tt := range tests {
		d, err := parseDueString(tt.in, now)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		if d.Date != tt.wantDate || d.IsRecurring != tt.recurring || d.String != tt.in {
			t.Errorf("%q = %+v, want date %s recurring %v", tt.in, *d, tt.wantDate, tt.recurring)
		}
	}
	if d, err := parseDueString("no date", now); d != nil || err != nil {
		t.Errorf("no date = %v, %v", d, err)
	}
	if _, err := parseDueString("when pigs fly", now); err == nil {
		t.Error("nonsense parsed")
	}
	d := &Due{Date: "2026-05-25", String: "every mon", IsRecurring: true}
	nextDue(d, now)
	if d.Date != "2026-06-01" {
		t.Errorf("next of every mon = %s", d.Date)
	}
}

func TestSyncWrites(t *testing.T) {
	s := New(t)
	task := s.AddTask(Task{Content: "Buy cake"})
	body := fmt.Sprintf(`{"commands":[
 {"type":"project_add","temp_id":"tmp-p","uuid":"u1","args":{"name":"Birthday"}},
 {"type":"item_move","uuid":"u2","args":{"id":%q,"project_id":"tmp-p"}},
 {"type":"item_add","temp_id":"tmp-t","uuid":"u3","args":{"content":"Invite","project_id":"tmp-p","priority":4,"due":{"string":"tomorrow"},"labels":["party"]}},
 {"type":"item_move","uuid":"u4","args":{"id":"AAAAAAAAAAAAAAAA","project_id":"tmp-p"}},
 {"type":"item_add","uuid":"u5","args":{"content":"x","project_id":"tmp-nope"}},
 {"type":"item_add","uuid":"u6","args":{"content":""}},
 {"type":"item_move","uuid":"u7","args":{"id":%q,"project_id":"tmp-p","section_id":"x"}}]}`, task.ID, task.ID)
	st, m := syncJSON(t, s, body)
	if st != 200 {
		t.Fatalf("status %d %v", st, m)
	}
	status := m["sync_status"].(map[string]any)
	mapping := m["temp_id_mapping"].(map[string]any)
	for _, u := range []string{"u1", "u2", "u3"} {
		if status[u] != "ok" {
			t.Errorf("%s: %v", u, status[u])
		}
	}
	for u, want := range map[string]string{"u4": "ITEM_NOT_FOUND", "u5": "INVALID_TEMP_ID", "u6": "ARGUMENT_MISSING", "u7": "INVALID_ARGUMENT_VALUE"} {
		e, _ := status[u].(map[string]any)
		if e["error_tag"] != want {
			t.Errorf("%s: %v, want %s", u, status[u], want)
		}
	}
	pid, _ := mapping["tmp-p"].(string)
	if !idRE.MatchString(pid) {
		t.Fatalf("temp_id_mapping %v", mapping)
	}
	if got, _ := s.Task(task.ID); got.ProjectID != pid {
		t.Errorf("task in %s, want %s", got.ProjectID, pid)
	}
	added, _ := s.Task(mapping["tmp-t"].(string))
	if added.Priority != 4 || added.Due == nil || !reflect.DeepEqual(added.Labels, []string{"party"}) {
		t.Errorf("added task %+v", added)
	}

	// The same commands again: nothing is applied twice, each is "ok", and
	// the temp ids are not mapped again (the case a client must survive).
	before := s.Snapshot()
	_, m = syncJSON(t, s, body)
	if !reflect.DeepEqual(s.Snapshot(), before) {
		t.Error("re-sent commands changed the state")
	}
	if got, ok := m["temp_id_mapping"].(map[string]any)["tmp-p"]; ok {
		t.Errorf("re-sent mapping %v, want none", got)
	}
	if got := m["sync_status"].(map[string]any)["u1"]; got != "ok" {
		t.Errorf("re-sent u1: %v, want ok", got)
	}
	if s.Applied("u1") != 1 || s.Applied("u4") != 0 {
		t.Errorf("Applied u1=%d u4=%d", s.Applied("u1"), s.Applied("u4"))
	}
}

func TestSyncFormAndLimits(t *testing.T) {
	s := New(t)
	s.SeedTalkInbox()
	form := url.Values{
		"sync_token":     {"*"},
		"resource_types": {`["all","-labels"]`},
		"commands":       {`[{"type":"label_add","uuid":"f1","args":{"name":"home"}}]`},
	}
	st, m := call(t, s, http.MethodPost, "/sync", "application/x-www-form-urlencoded", form.Encode())
	if st != 200 || m["sync_status"].(map[string]any)["f1"] != "ok" {
		t.Fatalf("form sync: %d %v", st, m)
	}
	if _, ok := m["labels"]; ok {
		t.Error("-labels did not exclude labels")
	}
	if items := m["items"].([]any); len(items) != len(TalkInbox) {
		t.Errorf("%d items, want %d", len(items), len(TalkInbox))
	}
	for _, p := range m["projects"].([]any) {
		if _, ok := p.(map[string]any)["shared"]; ok {
			t.Error(`/sync project has the API page's "shared", which the SDK does not read (see sdk_test.go)`)
		}
	}

	var cmds []string
	for i := range 101 {
		cmds = append(cmds, fmt.Sprintf(`{"type":"label_add","uuid":"l%d","args":{"name":"x%d"}}`, i, i))
	}
	if st, _ := syncJSON(t, s, `{"commands":[`+strings.Join(cmds, ",")+`]}`); st != 400 {
		t.Errorf("101 commands: status %d, want 400", st)
	}
	if n := len(s.Labels()); n != 1 {
		t.Errorf("%d labels after a rejected request, want 1", n)
	}
}

func TestPlanLimits(t *testing.T) {
	s := New(t, WithLimits(Limits{Projects: 2}))
	_, m := syncJSON(t, s, `{"commands":[
 {"type":"project_add","uuid":"a","temp_id":"ta","args":{"name":"One"}},
 {"type":"project_add","uuid":"b","temp_id":"tb","args":{"name":"Two"}}]}`)
	status := m["sync_status"].(map[string]any)
	e, _ := status["b"].(map[string]any)
	if status["a"] != "ok" || e["http_code"] != float64(403) || !strings.HasSuffix(e["error_tag"].(string), "_LIMIT_REACHED") {
		t.Errorf("status %v", status)
	}
}

func TestFaultsAndLatency(t *testing.T) {
	s := New(t)
	s.FailNext("/projects", 2, Fault{Status: 429, RetryAfter: "3", ExtraRetryAfter: 3})
	for i := range 2 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/projects", nil)
		req.Header.Set("Authorization", "Bearer "+s.Token)
		resp, err := s.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || e["error_extra"].(map[string]any)["retry_after"] != float64(3) {
			t.Errorf("request %d: %d %v", i, resp.StatusCode, e)
		}
	}
	if st, _ := call(t, s, http.MethodGet, "/projects", "", ""); st != 200 {
		t.Errorf("third request: %d, want 200", st)
	}
	if got := s.Requests("/projects"); got != 3 {
		t.Errorf("Requests = %d, want 3", got)
	}

	s.SetLatency("/labels", 30*time.Millisecond)
	start := time.Now()
	call(t, s, http.MethodGet, "/labels", "", "")
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("latency %v, want ≥ 30ms", d)
	}
}

func TestDirectClient(t *testing.T) {
	s := New(t)
	s.SeedTalkInbox()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, s.URL+"/tasks?limit=5", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := s.DirectClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || len(m["results"].([]any)) != 5 {
		t.Errorf("direct client: %v %v", err, m)
	}
}

func TestSeedInbox(t *testing.T) {
	s := New(t)
	ts := s.SeedInbox(40, 4)
	if len(ts) != 40 || len(s.TasksIn(s.InboxID())) != 40 {
		t.Fatalf("seeded %d", len(ts))
	}
	for i, task := range ts {
		if !strings.Contains(task.Content, GroupKeyword(i%4)) {
			t.Errorf("task %d %q lacks %q", i, task.Content, GroupKeyword(i%4))
		}
	}
	seen := map[string]bool{}
	for _, task := range ts {
		if seen[task.Content] {
			t.Errorf("duplicate content %q", task.Content)
		}
		seen[task.Content] = true
	}
}
