package evalcmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// RunStore is where tidybot eval --from-feedback reads the runs: the
// bot's store, opened for reading.
type RunStore interface {
	// Runs lists the runs without their transcripts.
	Runs(ctx context.Context, statuses ...bot.RunStatus) ([]*bot.Run, error)
	// Run returns one run with its transcript.
	Run(ctx context.Context, id string) (*bot.Run, error)
}

// FromFeedback writes, for each run its asker rated 👎, a draft task of
// the evaluation suite as Go source (an eval.Task literal for Suite() in
// internal/eval/suite.go): its seed is what the run read of the account
// (the projects, sections and tasks its transcript knows, as they were
// read), its turn the person's words (and their answer to the run's
// question), its clock the run's time; its goal is left for a person to
// fill in, with what the bot answered beside it. Every text is redacted
// with red. It returns how many drafts it wrote.
func FromFeedback(ctx context.Context, w io.Writer, st RunStore, red *agent.Redactor) (int, error) {
	runs, err := st.Runs(ctx)
	if err != nil {
		return 0, fmt.Errorf("eval: read runs: %w", err)
	}
	n := 0
	for _, listed := range runs {
		if listed.Feedback == nil || listed.Feedback.Rating != bot.FeedbackBad {
			continue
		}
		r, err := st.Run(ctx, listed.ID)
		if err != nil {
			return n, fmt.Errorf("eval: read run %s: %w", listed.ID, err)
		}
		var tr *agent.Transcript
		if len(r.Transcript) > 0 {
			if tr, err = agent.UnmarshalTranscript(r.Transcript); err != nil {
				return n, fmt.Errorf("eval: run %s: %w", r.ID, err)
			}
		}
		if n > 0 {
			fmt.Fprintln(w)
		}
		if _, err := io.WriteString(w, draft(r, tr, red)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// draft is one run's draft task.
func draft(r *bot.Run, tr *agent.Transcript, red *agent.Redactor) string {
	q := func(s string) string { return strconv.Quote(red.String(s)) }
	var b strings.Builder
	short := r.ID
	if len(short) > 8 {
		short = short[:8]
	}
	fmt.Fprintf(&b, "// Draft from run %s, rated 👎 on %s. Check the seed, write the goal,\n", r.ID, r.Feedback.At.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString("// then add it to Suite() in internal/eval/suite.go and run tidybot eval -run " + "feedback-" + short + ".\n")
	for _, line := range strings.Split(red.String(r.Answer), "\n") {
		b.WriteString("// The bot answered: " + line + "\n")
	}
	b.WriteString("eval.Task{\n")
	fmt.Fprintf(&b, "\tName:  %q,\n", "feedback-"+short)
	b.WriteString("\tAbout: \"TODO: what this task tests\",\n")
	b.WriteString("\tSeed: eval.Seed{\n")
	c := r.Created.UTC()
	fmt.Fprintf(&b, "\t\tClock: time.Date(%d, %d, %d, %d, %d, 0, 0, time.UTC), // the run's time; set Timezone if the person's is not Europe/Berlin\n",
		c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute())
	seed(&b, tr, q)
	b.WriteString("\t},\n")
	b.WriteString("\tTurns: []eval.Turn{{Message: " + q(r.Instruction))
	if r.Reply != "" {
		b.WriteString(", Answers: []string{" + q(r.Reply) + "}")
	}
	b.WriteString("}},\n")
	b.WriteString("\tGoal: []eval.Predicate{\n")
	b.WriteString("\t\t// TODO: what the data must look like afterwards, e.g. eval.InProject(\"dentist\", \"Health\"), eval.Open(\"milk\").\n")
	b.WriteString("\t},\n")
	b.WriteString("}\n")
	return b.String()
}

// seed writes the Projects, Labels and Tasks of a seed from what the
// run's transcript knows of the account.
func seed(b *strings.Builder, tr *agent.Transcript, q func(string) string) {
	if tr == nil || (len(tr.Known.Projects) == 0 && len(tr.Known.Tasks) == 0) {
		b.WriteString("\t\t// TODO: the run read nothing of the account: add the projects and tasks it needs.\n")
		return
	}
	k := tr.Known
	projects := map[string]string{} // id → name; the Inbox is ""
	var names []string
	for id, p := range k.Projects {
		if p.IsInbox || id == k.InboxID {
			projects[id] = ""
			continue
		}
		projects[id] = p.Name
		names = append(names, p.Name)
	}
	slices.Sort(names)
	sections := map[string]string{} // id → name
	byProject := map[string][]string{}
	for id, s := range k.Sections {
		sections[id] = s.Name
		if name, ok := projects[s.ProjectID]; ok && name != "" {
			byProject[name] = append(byProject[name], s.Name)
		}
	}
	if len(names) > 0 {
		b.WriteString("\t\tProjects: []eval.SeedProject{\n")
		for _, n := range names {
			fmt.Fprintf(b, "\t\t\t{Name: %s", q(n))
			if ss := byProject[n]; len(ss) > 0 {
				slices.Sort(ss)
				var qs []string
				for _, s := range ss {
					qs = append(qs, q(s))
				}
				b.WriteString(", Sections: []string{" + strings.Join(qs, ", ") + "}")
			}
			b.WriteString("},\n")
		}
		b.WriteString("\t\t},\n")
	}
	var tasks []agent.Task
	labels := map[string]bool{}
	for _, t := range k.Tasks {
		tasks = append(tasks, t)
		for _, l := range t.Labels {
			labels[l] = true
		}
	}
	slices.SortFunc(tasks, func(a, b agent.Task) int { return strings.Compare(a.Content, b.Content) })
	if len(labels) > 0 {
		var ls []string
		for l := range labels {
			ls = append(ls, q(l))
		}
		slices.Sort(ls)
		b.WriteString("\t\tLabels: []string{" + strings.Join(ls, ", ") + "},\n")
	}
	if len(tasks) == 0 {
		return
	}
	b.WriteString("\t\tTasks: []eval.SeedTask{\n")
	for _, t := range tasks {
		fmt.Fprintf(b, "\t\t\t{Content: %s", q(t.Content))
		if t.Description != "" {
			fmt.Fprintf(b, ", Description: %s", q(t.Description))
		}
		p, known := projects[t.ProjectID]
		if p != "" {
			fmt.Fprintf(b, ", Project: %s", q(p))
			if s := sections[t.SectionID]; s != "" {
				fmt.Fprintf(b, ", Section: %s", q(s))
			}
		}
		if len(t.Labels) > 0 {
			var ls []string
			for _, l := range t.Labels {
				ls = append(ls, q(l))
			}
			b.WriteString(", Labels: []string{" + strings.Join(ls, ", ") + "}")
		}
		if t.Priority != "" && t.Priority != agent.P4 {
			fmt.Fprintf(b, ", Priority: %q", string(t.Priority))
		}
		if d := strings.TrimSuffix(t.DueDate, "Z"); d != "" {
			fmt.Fprintf(b, ", Due: %q", d)
		}
		b.WriteString("},")
		if !known {
			b.WriteString(" // TODO: its project was not read by the run: name it")
		}
		b.WriteString("\n")
	}
	b.WriteString("\t\t},\n")
}
