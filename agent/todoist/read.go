package todoist

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidybot/tidybot/agent"
)

// idsPerRequest is how many ids one GET /tasks?ids= carries, to keep the
// URL short.
const idsPerRequest = 100

// maxFilterQuery is the longest query /tasks/filter accepts.
const maxFilterQuery = 1024

// User is the account the token belongs to.
type User struct {
	ID             string
	FullName       string
	Email          string
	InboxProjectID string
	Timezone       string
	Lang           string
	IsPremium      bool
}

// list reads every page of a paginated endpoint, with limit=200, following
// next_cursor until it is null.
func list[T any](ctx context.Context, c *Client, r call) ([]T, error) {
	q := url.Values{}
	for k, v := range r.query {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(pageLimit))
	r.query = q
	var all []T
	seen := map[string]bool{}
	for {
		var p page[T]
		if err := c.do(ctx, r, &p); err != nil {
			return nil, err
		}
		all = append(all, p.Results...)
		if p.NextCursor == nil || *p.NextCursor == "" {
			return all, nil
		}
		if seen[*p.NextCursor] {
			return nil, &agent.Error{Code: agent.ErrServer, Message: "Todoist repeated a page cursor for " + r.String()}
		}
		seen[*p.NextCursor] = true
		q.Set("cursor", *p.NextCursor)
	}
}

// Projects implements agent.Tasks: every active project, the Inbox
// included (IsInbox set).
func (c *Client) Projects(ctx context.Context) ([]agent.Project, error) {
	ps, err := list[restProject](ctx, c, call{method: http.MethodGet, path: "/projects"})
	if err != nil {
		return nil, fmt.Errorf("todoist: list projects: %w", err)
	}
	out := make([]agent.Project, 0, len(ps))
	for _, p := range ps {
		if p.IsArchived || p.IsDeleted {
			continue
		}
		out = append(out, p.toAgent())
	}
	return out, nil
}

// Project reads one project by id. An unknown id is an agent.ErrNotFound
// "no project with id X".
func (c *Client) Project(ctx context.Context, id string) (agent.Project, error) {
	if strings.TrimSpace(id) == "" {
		return agent.Project{}, fmt.Errorf("todoist: get project: %w", invalid("empty project id"))
	}
	var p restProject
	err := c.do(ctx, call{method: http.MethodGet, path: "/projects/" + url.PathEscape(id), notFound: "no project with id " + id}, &p)
	if err != nil {
		return agent.Project{}, fmt.Errorf("todoist: get project %s: %w", id, err)
	}
	return p.toAgent(), nil
}

// Inbox returns the Inbox project: the project marked inbox_project, or
// else the one GET /user names.
func (c *Client) Inbox(ctx context.Context) (agent.Project, error) {
	ps, err := c.Projects(ctx)
	if err != nil {
		return agent.Project{}, err
	}
	for _, p := range ps {
		if p.IsInbox {
			return p, nil
		}
	}
	u, err := c.User(ctx)
	if err != nil {
		return agent.Project{}, err
	}
	for _, p := range ps {
		if p.ID == u.InboxProjectID {
			p.IsInbox = true
			return p, nil
		}
	}
	return agent.Project{}, fmt.Errorf("todoist: find the inbox: %w", &agent.Error{Code: agent.ErrNotFound, Message: "the account has no Inbox project"})
}

// User reads the account's user (GET /user).
func (c *Client) User(ctx context.Context) (User, error) {
	var u restUser
	if err := c.do(ctx, call{method: http.MethodGet, path: "/user"}, &u); err != nil {
		return User{}, fmt.Errorf("todoist: get user: %w", err)
	}
	return User{ID: u.ID, FullName: u.FullName, Email: u.Email, InboxProjectID: u.InboxProjectID,
		Timezone: u.TZInfo.Timezone, Lang: u.Lang, IsPremium: u.IsPremium}, nil
}

// zoneTTL is how long TimeZone trusts the zone it read: a person who
// travels and changes it is seen within this time.
const zoneTTL = 10 * time.Minute

// TimeZone implements agent.TimeZoner: the user's time zone, from
// tz_info.timezone of the user resource (GET /user; developer.todoist.com/api/v1
// #tag/Sync/User), read at most once per zoneTTL. An empty or unknown zone
// is UTC.
func (c *Client) TimeZone(ctx context.Context) (*time.Location, error) {
	now := c.now()
	c.zoneMu.Lock()
	if c.zone != nil && now.Before(c.zoneUntil) {
		loc := c.zone
		c.zoneMu.Unlock()
		return loc, nil
	}
	c.zoneMu.Unlock()
	u, err := c.User(ctx)
	if err != nil {
		return nil, fmt.Errorf("todoist: read the user's time zone: %w", err)
	}
	return c.setZone(ctx, u.Timezone), nil
}

// setZone keeps the user's time zone for zoneTTL and returns it.
func (c *Client) setZone(ctx context.Context, name string) *time.Location {
	loc := time.UTC
	if name != "" {
		if l, err := time.LoadLocation(name); err == nil {
			loc = l
		} else {
			c.log.WarnContext(ctx, "todoist: unknown time zone; using UTC", slog.String("timezone", name))
		}
	}
	c.zoneMu.Lock()
	c.zone, c.zoneUntil = loc, c.now().Add(zoneTTL)
	c.zoneMu.Unlock()
	return loc
}

// Tasks implements agent.Tasks. A Filter goes to GET /tasks/filter?query=
// (never as a parameter of /tasks, which would ignore it and return
// everything); project, section, label and ids go to GET /tasks. An
// unknown project or section is an agent.ErrNotFound; unknown ids are
// left out of the result; a filter Todoist cannot parse is agent.ErrInvalid.
func (c *Client) Tasks(ctx context.Context, q agent.TaskQuery) ([]agent.Task, error) {
	ts, err := c.tasks(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("todoist: list tasks: %w", err)
	}
	out := make([]agent.Task, 0, len(ts))
	for _, t := range ts {
		if t.Checked || t.IsDeleted {
			continue
		}
		out = append(out, t.toAgent())
	}
	return out, nil
}

func (c *Client) tasks(ctx context.Context, q agent.TaskQuery) ([]restTask, error) {
	if f := strings.TrimSpace(q.Filter); f != "" {
		if q.ProjectID != "" || q.SectionID != "" || q.Label != "" || len(q.IDs) > 0 {
			return nil, invalid("a filter query cannot be combined with a project, section, label or ids; put them in the filter, e.g. '#Project & @label'")
		}
		if n := utf8.RuneCountInString(f); n > maxFilterQuery {
			return nil, invalid("the filter query is %d characters long; Todoist accepts at most %d", n, maxFilterQuery)
		}
		return list[restTask](ctx, c, call{method: http.MethodGet, path: "/tasks/filter", query: url.Values{"query": {f}}})
	}
	base := url.Values{}
	r := call{method: http.MethodGet, path: "/tasks", query: base}
	switch {
	case q.SectionID != "":
		base.Set("section_id", q.SectionID)
		r.notFound = "no section with id " + q.SectionID
	case q.ProjectID != "":
		r.notFound = "no project with id " + q.ProjectID
	}
	if q.ProjectID != "" {
		base.Set("project_id", q.ProjectID)
	}
	if q.Label != "" {
		base.Set("label", q.Label)
	}
	if len(q.IDs) == 0 {
		return list[restTask](ctx, c, r)
	}
	for _, id := range q.IDs {
		if strings.TrimSpace(id) == "" || strings.Contains(id, ",") {
			return nil, invalid("task id %q is not a valid id", id)
		}
	}
	var all []restTask
	for start := 0; start < len(q.IDs); start += idsPerRequest {
		chunk := q.IDs[start:min(start+idsPerRequest, len(q.IDs))]
		cr := r
		cr.query = url.Values{}
		for k, v := range base {
			cr.query[k] = v
		}
		cr.query.Set("ids", strings.Join(chunk, ","))
		ts, err := list[restTask](ctx, c, cr)
		if err != nil {
			return nil, err
		}
		all = append(all, ts...)
	}
	return all, nil
}

// Sections implements agent.Tasks. An unknown project is an
// agent.ErrNotFound "no project with id X".
func (c *Client) Sections(ctx context.Context, projectID string) ([]agent.Section, error) {
	if strings.TrimSpace(projectID) == "" {
		return nil, fmt.Errorf("todoist: list sections: %w", invalid("empty project id: give the project whose sections to list"))
	}
	ss, err := list[restSection](ctx, c, call{method: http.MethodGet, path: "/sections",
		query: url.Values{"project_id": {projectID}}, notFound: "no project with id " + projectID})
	if err != nil {
		return nil, fmt.Errorf("todoist: list sections of %s: %w", projectID, err)
	}
	out := make([]agent.Section, 0, len(ss))
	for _, s := range ss {
		if s.IsArchived || s.IsDeleted {
			continue
		}
		out = append(out, agent.Section{ID: s.ID, ProjectID: s.ProjectID, Name: s.Name})
	}
	return out, nil
}

// Labels implements agent.Tasks: the personal labels.
func (c *Client) Labels(ctx context.Context) ([]agent.Label, error) {
	ls, err := list[restLabel](ctx, c, call{method: http.MethodGet, path: "/labels"})
	if err != nil {
		return nil, fmt.Errorf("todoist: list labels: %w", err)
	}
	out := make([]agent.Label, len(ls))
	for i, l := range ls {
		out[i] = agent.Label{ID: l.ID, Name: l.Name}
	}
	return out, nil
}
