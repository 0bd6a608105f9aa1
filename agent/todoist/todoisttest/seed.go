package todoisttest

import "fmt"

// TalkInbox is the content of the tasks SeedTalkInbox puts in the Inbox,
// in order: three groups (a PyData talk, a birthday, a personal website),
// interleaved.
var TalkInbox = []string{
	"Finish slides for PyData talk",
	"Buy birthday cake for Anna",
	"Update personal website bio",
	"Submit PyData talk abstract",
	"Send invitations to birthday party",
	"Fix broken links on personal website",
	"Rehearse PyData talk",
	"Book a table for the birthday dinner",
	"Add blog section to personal website",
}

// SeedTalkInbox adds the talk's demo inbox (TalkInbox: nine tasks, no
// due dates, default priority, no labels) and returns the tasks.
func (s *Server) SeedTalkInbox() []Task {
	out := make([]Task, len(TalkInbox))
	for i, c := range TalkInbox {
		out[i] = s.AddTask(Task{Content: c})
	}
	return out
}

var groupKeywords = []string{
	"PyData talk", "birthday party", "personal website", "tax return",
	"garden", "car service", "kitchen renovation", "summer holiday",
	"job applications", "book club", "marathon training", "wedding",
	"home office", "photo album", "language course", "podcast",
}

var groupVerbs = []string{
	"Plan", "Research", "Email about", "Schedule", "Buy supplies for",
	"Review notes on", "Call about", "Budget for", "Draft a checklist for", "Follow up on",
}

// GroupKeyword returns the keyword of group g in SeedInbox: "PyData talk",
// "birthday party", "personal website", … and, past the sixteenth,
// "topic 17", "topic 18", ….
func GroupKeyword(g int) string {
	if g < len(groupKeywords) {
		return groupKeywords[g]
	}
	return fmt.Sprintf("topic %d", g+1)
}

// SeedInbox adds n tasks to the Inbox in groups keyword groups (for
// benchmarks): task i belongs to group i % groups, and its content holds
// GroupKeyword of that group ("Research garden (3)"). It returns the
// tasks in order.
func (s *Server) SeedInbox(n, groups int) []Task {
	groups = max(groups, 1)
	out := make([]Task, n)
	for i := range n {
		g, k := i%groups, i/groups
		content := fmt.Sprintf("%s %s (%d)", groupVerbs[k%len(groupVerbs)], GroupKeyword(g), k+1)
		out[i] = s.AddTask(Task{Content: content})
	}
	return out
}
