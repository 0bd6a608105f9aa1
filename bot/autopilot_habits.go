package bot

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/tidybot/tidybot/agent"
)

// How the person filed before, from the run journal of their
// conversation: every move of a task (by them asking, or by autopilot
// and kept) counts for the task's first word and its destination; an
// autopilot move they undid is a correction. The autopilot's prompt
// gets the habits of the new tasks' first words first, then the
// person's most frequent ones.

// habitRuns bounds the runs whose journals are read (newest first).
const habitRuns = 200

// habitLines bounds the lines of habits and corrections in a prompt.
const habitLines = 12

type habitKey struct{ word, dest string }

// habits describes, in lines for the prompt, how the person filed tasks
// like tasks before; "" when the journal holds none.
func (b *Bot) habits(ctx context.Context, threadKey string, tasks []agent.Task) (string, error) {
	runs, err := b.store.ThreadRuns(ctx, threadKey)
	if err != nil {
		return "", fmt.Errorf("bot: autopilot: list runs of %s: %w", threadKey, err)
	}
	filed, undone := map[habitKey]int{}, map[habitKey]int{}
	read := 0
	for i := len(runs) - 1; i >= 0 && read < habitRuns; i-- {
		r := runs[i]
		if !r.Status.Final() || (r.Undone && !r.Autopilot) {
			continue
		}
		read++
		entries, err := b.store.RunAudit(ctx, r.ID)
		if err != nil {
			return "", fmt.Errorf("bot: autopilot: read journal of %s: %w", r.ID, err)
		}
		for _, e := range entries {
			if e.Write.Kind != agent.MoveTask {
				continue
			}
			title, dest, ok := movedSummary(e.Summary)
			if !ok || firstWord(title) == "" {
				continue
			}
			k := habitKey{firstWord(title), dest}
			if r.Undone {
				undone[k]++
			} else {
				filed[k]++
			}
		}
	}
	if len(filed) == 0 && len(undone) == 0 {
		return "", nil
	}
	words := map[string]bool{}
	for _, t := range tasks {
		words[firstWord(t.Content)] = true
	}
	order := func(m map[habitKey]int) []habitKey {
		keys := make([]habitKey, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, c habitKey) int {
			// The new tasks' words first, then the most frequent.
			if words[a.word] != words[c.word] {
				if words[a.word] {
					return -1
				}
				return 1
			}
			return cmp.Or(cmp.Compare(m[c], m[a]), cmp.Compare(a.word, c.word), cmp.Compare(a.dest, c.dest))
		})
		return keys
	}
	var lines []string
	for _, k := range order(undone) {
		lines = append(lines, fmt.Sprintf("- correction: you undid my filing of %q into %s %s; do not file such tasks there", k.word+" …", k.dest, times(undone[k])))
	}
	for _, k := range order(filed) {
		lines = append(lines, fmt.Sprintf("- you filed %q into %s %s", k.word+" …", k.dest, times(filed[k])))
	}
	if len(lines) > habitLines {
		lines = lines[:habitLines]
	}
	return strings.Join(lines, "\n"), nil
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

// movedSummary reads a move's journal summary, `moved "Buy milk" to
// Groceries` (see agent's move_tasks plan).
func movedSummary(s string) (title, dest string, ok bool) {
	rest, ok := strings.CutPrefix(s, "moved ")
	if !ok {
		return "", "", false
	}
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return "", "", false
	}
	title, err = strconv.Unquote(q)
	if err != nil {
		return "", "", false
	}
	dest, ok = strings.CutPrefix(rest[len(q):], " to ")
	return title, dest, ok && dest != ""
}

// firstWord is a title's first word, lower-cased, letters and digits
// only ("Buy milk!" → "buy").
func firstWord(title string) string {
	f := strings.FieldsFunc(strings.ToLower(title), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
