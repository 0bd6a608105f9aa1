package todoist

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// Whether Todoist answers a command re-sent with a uuid it has already run
// with that command's temp_id_mapping is undocumented: the docs say only
// that such a command "will not be executed" again
// (developer.todoist.com/api/v1 #tag/Sync/Overview, "Command UUID"). A
// create re-sent after a lost answer may therefore come back "ok" without
// its new id. findCreated finds it by reading instead, so that the caller
// never records an empty id or a temp id.

// findCreated looks up the objects that the creates at unmapped (temp id →
// index) made, by reading what they must have made: the newest object of
// the kind with the write's name (or content) in its place. A create that
// cannot be found fails with an error saying so; a read that fails is
// returned.
func (b *batch) findCreated(ctx context.Context, unmapped map[string]int) error {
	idx := make([]int, 0, len(unmapped))
	for _, i := range unmapped {
		idx = append(idx, i)
	}
	slices.Sort(idx) // a create's parent is created (and found) first
	for _, i := range idx {
		w, err := substitute(b.ws[i], len(b.ws), b.declared, b.resolved, b.failed)
		if err != nil {
			b.fail(i, err)
			continue
		}
		id, err := b.c.findCreated(ctx, w)
		if err != nil {
			return fmt.Errorf("find what %s created: %w", describe(w), err)
		}
		if id == "" {
			b.fail(i, &agent.Error{Code: agent.ErrServer, Message: fmt.Sprintf(
				"Todoist had already applied %s but did not give its new id, and it cannot be found by reading; read the current state before retrying", describe(w))})
			continue
		}
		b.results[i].NewID = id
		b.resolved[w.TempID] = id
	}
	return nil
}

// candidate is an object a create may have made, with when it was made
// (RFC 3339, ordered by stamp; "" when unknown).
type candidate struct {
	id string
	at string
}

// findCreated returns the id of the newest object w could have made, or
// "" if there is none.
func (c *Client) findCreated(ctx context.Context, w agent.Write) (string, error) {
	find := kinds[w.Kind].find
	if find == nil {
		return "", nil
	}
	cands, err := find(ctx, c, w)
	if err != nil || len(cands) == 0 {
		return "", err
	}
	newest := slices.MaxFunc(cands, func(a, b candidate) int { return cmp.Compare(stamp(a.at), stamp(b.at)) })
	return newest.id, nil
}

// findProject: the projects with w's name under w's parent.
func findProject(ctx context.Context, c *Client, w agent.Write) ([]candidate, error) {
	ps, err := list[restProject](ctx, c, call{method: http.MethodGet, path: "/projects"})
	var cands []candidate
	for _, p := range ps {
		if !p.IsDeleted && p.Name == strings.TrimSpace(w.Name) && p.ParentID == w.ParentID {
			cands = append(cands, candidate{p.ID, p.CreatedAt})
		}
	}
	return cands, err
}

// findSection: the sections with w's name in w's project.
func findSection(ctx context.Context, c *Client, w agent.Write) ([]candidate, error) {
	ss, err := list[restSection](ctx, c, call{method: http.MethodGet, path: "/sections", query: url.Values{"project_id": {w.ProjectID}}})
	var cands []candidate
	for _, x := range ss {
		if !x.IsDeleted && x.Name == strings.TrimSpace(w.Name) {
			cands = append(cands, candidate{x.ID, x.AddedAt})
		}
	}
	return cands, err
}

// findLabel: the label with w's name (label names are unique, in any
// case).
func findLabel(ctx context.Context, c *Client, w agent.Write) ([]candidate, error) {
	ls, err := list[restLabel](ctx, c, call{method: http.MethodGet, path: "/labels"})
	var cands []candidate
	for _, l := range ls {
		if strings.EqualFold(l.Name, strings.TrimSpace(w.Name)) {
			cands = append(cands, candidate{l.ID, ""})
		}
	}
	return cands, err
}

// findTask: the tasks with w's content where w put it (the Inbox when
// it names no project or section).
func findTask(ctx context.Context, c *Client, w agent.Write) ([]candidate, error) {
	q := url.Values{}
	switch {
	case w.SectionID != "":
		q.Set("section_id", w.SectionID)
	case w.ProjectID != "":
		q.Set("project_id", w.ProjectID)
	default:
		inbox, err := c.Inbox(ctx)
		if err != nil {
			return nil, err
		}
		q.Set("project_id", inbox.ID)
	}
	ts, err := list[restTask](ctx, c, call{method: http.MethodGet, path: "/tasks", query: q})
	content := ""
	if w.Content != nil {
		content = strings.TrimSpace(*w.Content)
	}
	var cands []candidate
	for _, t := range ts {
		if !t.IsDeleted && t.Content == content && (w.SectionID == "" || t.SectionID == w.SectionID) {
			cands = append(cands, candidate{t.ID, t.AddedAt})
		}
	}
	return cands, err
}

// stamp reads an API timestamp for ordering; an unreadable one is oldest.
func stamp(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}
