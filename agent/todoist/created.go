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

// findCreated returns the id of the newest object w could have made, or
// "" if there is none.
func (c *Client) findCreated(ctx context.Context, w agent.Write) (string, error) {
	type found struct {
		id string
		at string // RFC 3339, ordered by stamp
	}
	var cands []found
	switch w.Kind {
	case agent.AddProject:
		ps, err := list[restProject](ctx, c, call{method: http.MethodGet, path: "/projects"})
		if err != nil {
			return "", err
		}
		for _, p := range ps {
			if !p.IsDeleted && p.Name == strings.TrimSpace(w.Name) && p.ParentID == w.ParentID {
				cands = append(cands, found{p.ID, p.CreatedAt})
			}
		}
	case agent.AddSection:
		ss, err := list[restSection](ctx, c, call{method: http.MethodGet, path: "/sections", query: url.Values{"project_id": {w.ProjectID}}})
		if err != nil {
			return "", err
		}
		for _, x := range ss {
			if !x.IsDeleted && x.Name == strings.TrimSpace(w.Name) {
				cands = append(cands, found{x.ID, x.AddedAt})
			}
		}
	case agent.AddLabel:
		ls, err := list[restLabel](ctx, c, call{method: http.MethodGet, path: "/labels"})
		if err != nil {
			return "", err
		}
		for _, l := range ls {
			if strings.EqualFold(l.Name, strings.TrimSpace(w.Name)) {
				cands = append(cands, found{l.ID, ""})
			}
		}
	case agent.AddTask:
		q := url.Values{}
		switch {
		case w.SectionID != "":
			q.Set("section_id", w.SectionID)
		case w.ProjectID != "":
			q.Set("project_id", w.ProjectID)
		default:
			inbox, err := c.Inbox(ctx)
			if err != nil {
				return "", err
			}
			q.Set("project_id", inbox.ID)
		}
		ts, err := list[restTask](ctx, c, call{method: http.MethodGet, path: "/tasks", query: q})
		if err != nil {
			return "", err
		}
		content := ""
		if w.Content != nil {
			content = strings.TrimSpace(*w.Content)
		}
		for _, t := range ts {
			if !t.IsDeleted && t.Content == content && (w.SectionID == "" || t.SectionID == w.SectionID) {
				cands = append(cands, found{t.ID, t.AddedAt})
			}
		}
	}
	if len(cands) == 0 {
		return "", nil
	}
	newest := slices.MaxFunc(cands, func(a, b found) int { return cmp.Compare(stamp(a.at), stamp(b.at)) })
	return newest.id, nil
}

// stamp reads an API timestamp for ordering; an unreadable one is oldest.
func stamp(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}
