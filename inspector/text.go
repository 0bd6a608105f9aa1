package inspector

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
)

// WriteList prints runs, newest first, at most n (0: all), as a table:
// id, conversation, status, steps, tokens, age.
func WriteList(w io.Writer, runs []*bot.Run, n int, now time.Time, red *agent.Redactor) error {
	runs = append([]*bot.Run(nil), runs...)
	sort.SliceStable(runs, func(i, j int) bool { return runs[i].Created.After(runs[j].Created) })
	if n > 0 && len(runs) > n {
		runs = runs[:n]
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tCONVERSATION\tSTATUS\tSTEPS\tTOKENS\tAGE\tRATED")
	for _, r := range runs {
		rated := Rating(r)
		if rated == "" {
			rated = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.ID, oneLine(conversation(red.String(r.ThreadKey)), 40), r.Status, r.Usage.Calls, num(r.Usage.Total()), age(now.Sub(r.Created)), rated)
	}
	if len(runs) == 0 {
		fmt.Fprintln(tw, "(no runs)")
	}
	return tw.Flush()
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return "just now"
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// barWidth is the longest text bar, in characters.
const barWidth = 30

// WriteRun prints v as text: what was asked and answered, the timeline
// (M model, T Todoist, W waiting for the user) and each step.
func WriteRun(w io.Writer, v *View) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s · %s · %s · %s\n", v.ID, v.Status, v.Conversation, v.Created.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Asked:  %s\n", indent(v.Instruction))
	if v.Question != "" {
		fmt.Fprintf(&b, "Asking: %s\n", indent(v.Question))
	} else {
		fmt.Fprintf(&b, "Answer: %s\n", indent(v.Answer))
	}
	if v.Feedback != "" {
		fmt.Fprintf(&b, "Rated:  %s by the person who asked\n", v.Feedback)
	}
	t := v.Totals
	fmt.Fprintf(&b, "\nTotals: model %d calls %s, %s prompt + %s completion tokens · Todoist %d requests %s · waiting for you %s\n",
		t.ModelCalls, Dur(t.Model), num(t.PromptTokens), num(t.CompletionTokens), t.TodoistRequests, Dur(t.Todoist), Dur(t.Wait))
	if len(v.Timeline.Rows) > 0 {
		b.WriteString("\nTimeline (M model, T Todoist, W waiting for you; a long wait is cut short, ~):\n")
		for _, r := range v.Timeline.Rows {
			var bar strings.Builder
			for _, br := range r.Bars {
				n := max(br.W*barWidth/tlBars, 1)
				c := map[string]string{"model": "M", "todoist": "T", "wait": "W", "wait cut": "W"}[br.Class]
				bar.WriteString(strings.Repeat(c, n))
				if br.Class == "wait cut" {
					bar.WriteString("~")
				}
			}
			fmt.Fprintf(&b, "  %-8s %-*s %s\n", r.Label, barWidth+1, bar.String(), r.Total)
		}
	}
	for _, s := range v.Steps {
		writeStep(&b, s)
	}
	if len(v.Writes) > 0 {
		b.WriteString("\nChanges:\n")
		for _, wr := range v.Writes {
			state := "applied"
			if wr.Undone {
				state = "undone"
			}
			fmt.Fprintf(&b, "  • %s (%s)\n", wr.Summary, state)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeStep prints one step of a run: its timings, thought, actions and
// notes.
func writeStep(b *strings.Builder, s Step) {
	fmt.Fprintf(b, "\nStep %d", s.N)
	for _, m := range s.Model {
		fmt.Fprintf(b, " · model %s, %s + %s tokens", Dur(m.Dur), num(m.PromptTokens), num(m.CompletionTokens))
		if m.Failed {
			b.WriteString(" (failed)")
		}
	}
	for _, c := range s.Todoist {
		fmt.Fprintf(b, " · Todoist %s %s", c.Op, Dur(c.Dur))
		if c.Failed {
			b.WriteString(" (failed)")
		}
	}
	if s.Wait > 0 {
		fmt.Fprintf(b, " · waited %s for you", Dur(s.Wait))
	}
	b.WriteString("\n")
	if s.Thought != "" {
		fmt.Fprintf(b, "  thought: %s\n", indent(s.Thought))
	}
	for _, a := range s.Actions {
		kind := ""
		if a.Write {
			kind = " [write]"
		}
		if a.Confirmed {
			kind += " [you confirmed it]"
		}
		if a.Declined {
			kind += " [you said no]"
		}
		if a.Question != "" {
			fmt.Fprintf(b, "  %s%s: %s\n", a.Name, kind, indent(a.Question))
			if a.Answer != "" {
				fmt.Fprintf(b, "    answer: %s\n", indent(a.Answer))
			}
			continue
		}
		fmt.Fprintf(b, "  %s%s %s\n", a.Name, kind, oneLine(a.Args.Full, 200))
		if a.HasResult {
			fmt.Fprintf(b, "    → %s\n", indent(a.Observation.Short))
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintf(b, "  note: %s\n", indent(n.Short))
	}
}

func indent(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n      ") }

// TextUsage is the usage of `tidybot runs`, whose arguments name
// TextHandler's views (TextPath).
const TextUsage = `Usage:
  tidybot runs [-n N]     the N latest runs (default 20): id, conversation, status, steps, tokens, age
  tidybot runs show ID    one run: what was asked and answered, a timeline of model, Todoist and waiting time, each step
  tidybot runs link ID    a signed address of the run's page (TIDYBOT_PUBLIC_URL, else serve's TIDYBOT_HTTP_ADDR)
`

// TextPath is TextHandler's path for the arguments of `tidybot runs`.
func TextPath(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "/runs?n=20", nil
	case len(args) == 2 && args[0] == "-n":
		n, err := strconv.Atoi(args[1])
		if err != nil || n <= 0 {
			return "", fmt.Errorf("runs: -n takes a positive number, not %q", args[1])
		}
		return "/runs?n=" + strconv.Itoa(n), nil
	case len(args) == 2 && args[0] == "show":
		return "/runs/" + url.PathEscape(args[1]), nil
	case len(args) == 2 && args[0] == "link":
		return "/runs/" + url.PathEscape(args[1]) + "/link", nil
	}
	return "", fmt.Errorf("runs: unexpected %q\n%s", args, TextUsage)
}

// TextHandler serves the terminal's views for `tidybot runs` while serve
// holds the database: GET /runs (the list; ?n= caps it), GET /runs/{id}
// (one run's timeline) and GET /runs/{id}/link (a signed address of its
// page, made by link; nil: none), as plain text. It checks no signature:
// serve offers it only on a unix socket beside the database, which only
// those who may read the database can reach.
func TextHandler(src Source, red *agent.Redactor, now func() time.Time, link func(runID string) string) http.Handler {
	if now == nil {
		now = time.Now
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs", func(w http.ResponseWriter, r *http.Request) {
		runs, err := src.Runs(r.Context())
		if err != nil {
			http.Error(w, "list runs: "+red.String(err.Error()), http.StatusInternalServerError)
			return
		}
		n := 0
		_, _ = fmt.Sscan(r.URL.Query().Get("n"), &n)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = WriteList(w, runs, n, now(), red)
	})
	mux.HandleFunc("GET /runs/{id}", func(w http.ResponseWriter, r *http.Request) {
		run, err := src.Run(r.Context(), r.PathValue("id"))
		if errors.Is(err, bot.ErrNotFound) {
			http.Error(w, "no run with id "+r.PathValue("id"), http.StatusNotFound)
			return
		}
		if err != nil {
			http.Error(w, "read run: "+red.String(err.Error()), http.StatusInternalServerError)
			return
		}
		v, err := Build(run, red)
		if err != nil {
			http.Error(w, red.String(err.Error()), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_ = WriteRun(w, v)
	})
	mux.HandleFunc("GET /runs/{id}/link", func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if _, err := src.Run(r.Context(), id); errors.Is(err, bot.ErrNotFound) {
			http.Error(w, "no run with id "+id, http.StatusNotFound)
			return
		} else if err != nil {
			http.Error(w, "read run: "+red.String(err.Error()), http.StatusInternalServerError)
			return
		}
		if link == nil {
			http.Error(w, "no link: the signing key is not known here", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = fmt.Fprintln(w, link(id))
	})
	return mux
}
