package todoisttest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// A small evaluator for Todoist filter queries (see the package comment
// for what it understands).

type filterEnv struct {
	st  *store
	now time.Time // the user's wall clock, as UTC (Server.wallNow)
}

func (e *filterEnv) today() string { return e.now.Format(time.DateOnly) }

// filterNode is a parsed filter query.
type filterNode interface {
	match(t *Task, e *filterEnv) bool
}

type orNode struct{ a, b filterNode }
type andNode struct{ a, b filterNode }
type notNode struct{ a filterNode }
type termNode func(t *Task, e *filterEnv) bool

func (n orNode) match(t *Task, e *filterEnv) bool  { return n.a.match(t, e) || n.b.match(t, e) }
func (n andNode) match(t *Task, e *filterEnv) bool { return n.a.match(t, e) && n.b.match(t, e) }
func (n notNode) match(t *Task, e *filterEnv) bool { return !n.a.match(t, e) }
func (n termNode) match(t *Task, e *filterEnv) bool {
	return n(t, e)
}

// parseFilter parses a query; the error says what is wrong with it.
func parseFilter(q string) (filterNode, error) {
	if strings.Contains(q, ",") {
		return nil, errors.New("comma-separated queries are not supported; use | to combine")
	}
	p := &filterParser{s: q}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.s) {
		return nil, fmt.Errorf("unexpected %q at position %d", p.s[p.i:], p.i+1)
	}
	return n, nil
}

type filterParser struct {
	s string
	i int
}

func (p *filterParser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *filterParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *filterParser) or() (filterNode, error) {
	n, err := p.and()
	for err == nil && p.peek() == '|' {
		p.i++
		var m filterNode
		if m, err = p.and(); err == nil {
			n = orNode{n, m}
		}
	}
	return n, err
}

func (p *filterParser) and() (filterNode, error) {
	n, err := p.unary()
	for err == nil && p.peek() == '&' {
		p.i++
		var m filterNode
		if m, err = p.unary(); err == nil {
			n = andNode{n, m}
		}
	}
	return n, err
}

func (p *filterParser) unary() (filterNode, error) {
	switch p.peek() {
	case '!':
		p.i++
		n, err := p.unary()
		return notNode{n}, err
	case '(':
		p.i++
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, errors.New("missing )")
		}
		p.i++
		return n, nil
	case 0:
		return nil, errors.New("unexpected end of query")
	}
	// A term runs to the next operator; \ escapes one character.
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '\\' && p.i+1 < len(p.s) {
			b.WriteByte(p.s[p.i+1])
			p.i += 2
			continue
		}
		if c == '|' || c == '&' || c == '(' || c == ')' {
			break
		}
		b.WriteByte(c)
		p.i++
	}
	return term(strings.TrimSpace(b.String()))
}

// term parses one filter term.
func term(s string) (filterNode, error) {
	l := strings.ToLower(s)
	switch {
	case l == "":
		return nil, errors.New("empty term")
	case strings.HasPrefix(l, "##"):
		name := strings.TrimSpace(s[2:])
		return termNode(func(t *Task, e *filterEnv) bool {
			for _, p := range e.st.projects {
				if wildMatch(name, p.Name) && e.st.subprojects(p.ID)[t.ProjectID] {
					return true
				}
			}
			return false
		}), nil
	case strings.HasPrefix(l, "#"):
		name := strings.TrimSpace(s[1:])
		return termNode(func(t *Task, e *filterEnv) bool {
			p := e.st.projectByID[t.ProjectID]
			return p != nil && wildMatch(name, p.Name)
		}), nil
	case strings.HasPrefix(l, "/"):
		name := strings.TrimSpace(s[1:])
		return termNode(func(t *Task, e *filterEnv) bool {
			x := e.st.sectionByID[t.SectionID]
			return x != nil && wildMatch(name, x.Name)
		}), nil
	case strings.HasPrefix(l, "@"):
		name := strings.TrimSpace(s[1:])
		return termNode(func(t *Task, e *filterEnv) bool {
			for _, lb := range t.Labels {
				if wildMatch(name, lb) {
					return true
				}
			}
			return false
		}), nil
	case strings.HasPrefix(l, "search:"):
		text := strings.ToLower(strings.TrimSpace(s[len("search:"):]))
		if text == "" {
			return nil, errors.New("search: needs a text")
		}
		return termNode(func(t *Task, e *filterEnv) bool {
			return strings.Contains(strings.ToLower(t.Content), text)
		}), nil
	}
	switch l {
	case "p1", "p2", "p3", "p4":
		want := 5 - int(l[1]-'0')
		return termNode(func(t *Task, e *filterEnv) bool { return t.Priority == want }), nil
	case "today", "tod":
		return dueOn(0), nil
	case "tomorrow", "tom":
		return dueOn(1), nil
	case "yesterday":
		return dueOn(-1), nil
	case "overdue", "od":
		return termNode(func(t *Task, e *filterEnv) bool {
			if t.Due == nil {
				return false
			}
			if len(t.Due.Date) > 10 { // a date-time
				at, err := time.Parse("2006-01-02T15:04:05", strings.TrimSuffix(t.Due.Date, "Z")[:19])
				return err == nil && at.Before(e.now)
			}
			return t.Due.Date < e.today()
		}), nil
	case "no date", "no due date":
		return termNode(func(t *Task, e *filterEnv) bool { return t.Due == nil }), nil
	case "recurring":
		return termNode(func(t *Task, e *filterEnv) bool { return t.Due != nil && t.Due.IsRecurring }), nil
	case "no labels", "no label":
		return termNode(func(t *Task, e *filterEnv) bool { return len(t.Labels) == 0 }), nil
	case "subtask", "subtasks":
		return termNode(func(t *Task, e *filterEnv) bool { return t.ParentID != "" }), nil
	case "view all", "all":
		return termNode(func(t *Task, e *filterEnv) bool { return true }), nil
	}
	// "7 days" and "next 7 days": due from today through today+N-1.
	if n, ok := strings.CutSuffix(strings.TrimPrefix(l, "next "), " days"); ok {
		if days, err := strconv.Atoi(n); err == nil && days > 0 {
			return termNode(func(t *Task, e *filterEnv) bool {
				if t.Due == nil {
					return false
				}
				d := t.Due.Date[:10]
				return d >= e.today() && d <= e.now.AddDate(0, 0, days-1).Format(time.DateOnly)
			}), nil
		}
	}
	return nil, fmt.Errorf("unknown filter term %q", s)
}

// dueOn matches tasks due on today+days.
func dueOn(days int) termNode {
	return func(t *Task, e *filterEnv) bool {
		return t.Due != nil && len(t.Due.Date) >= 10 && t.Due.Date[:10] == e.now.AddDate(0, 0, days).Format(time.DateOnly)
	}
}

// wildMatch matches name against a pattern in which * stands for any
// text, ignoring case.
func wildMatch(pattern, name string) bool {
	pattern, name = strings.ToLower(pattern), strings.ToLower(name)
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == name
	}
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(name, part)
		if i < 0 {
			return false
		}
		name = name[i+len(part):]
	}
	return strings.HasSuffix(name, parts[len(parts)-1])
}
