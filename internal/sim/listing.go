package sim

import (
	"regexp"
	"strconv"
	"strings"
)

// A listing line names a task by id and content: `- ID "content" …` in
// most lists, `ID content …` (the content quoted only where it could be
// misread) in the compact inbox listing, each followed by fields only
// where set (" · due …", " / section", " @label") and perhaps a warning.
var lineStart = regexp.MustCompile(`^(- )?([A-Za-z0-9_-]+) (.+)$`)

// fieldMarks end a bare content.
var fieldMarks = []string{" · ", " / ", " @", " ⚠️"}

// parseTaskLine reads a task's id and content from a listing line.
func parseTaskLine(line string) (task, bool) {
	m := lineStart.FindStringSubmatch(line)
	if m == nil {
		return task{}, false
	}
	rest := m[3]
	if strings.HasPrefix(rest, `"`) {
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			return task{}, false
		}
		content, err := strconv.Unquote(q)
		if err != nil {
			return task{}, false
		}
		return task{m[2], content}, true
	}
	if m[1] != "" {
		return task{}, false // the dashed form always quotes
	}
	end := len(rest)
	for _, mark := range fieldMarks {
		if i := strings.Index(rest, mark); i >= 0 && i < end {
			end = i
		}
	}
	return task{m[2], rest[:end]}, true
}

// endOfList reports whether a line ends a task listing: another heading
// or the note on what was left out.
func endOfList(line string) bool {
	return line == "" || strings.HasPrefix(line, "… ") || strings.HasPrefix(line, "Labels (") || strings.HasPrefix(line, "Projects (")
}

// listedTasks reads the tasks listed under heading in obs, in order.
func listedTasks(obs, heading string) []task {
	i := strings.Index(obs, heading)
	if i < 0 {
		return nil
	}
	lines := strings.Split(obs[i:], "\n")
	var out []task
	for _, line := range lines[1:] {
		if endOfList(line) {
			break
		}
		if t, ok := parseTaskLine(line); ok {
			out = append(out, t)
		}
	}
	return out
}
