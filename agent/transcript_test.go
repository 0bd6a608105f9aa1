package agent

import (
	"fmt"
	"strings"
	"testing"
)

func TestDoneList(t *testing.T) {
	var many Transcript
	for i := range 17 {
		many.Journal = append(many.Journal, Applied{Summary: fmt.Sprintf("moved %d", i)})
	}
	for _, c := range []struct {
		name string
		tr   *Transcript
		want string
	}{
		{"nil", nil, "Nothing was changed."},
		{"empty", &Transcript{}, "Nothing was changed."},
		{"one", &Transcript{Journal: []Applied{{Summary: `moved "Buy cake" to Birthday`}}}, "Done so far:\n• moved \"Buy cake\" to Birthday"},
		{"capped", &many, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.tr.DoneList()
			if c.name == "capped" {
				if !strings.HasSuffix(got, "\n• moved 14\n• … and 2 more changes") || strings.Contains(got, "moved 15") {
					t.Errorf("got %q, want 15 writes and a count of the rest", got)
				}
				return
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestReportKeepsWhatCannotBeUndone(t *testing.T) {
	var tr Transcript
	for i := range 4 {
		name := fmt.Sprintf("Task %d", i)
		tr.Journal = append(tr.Journal, Applied{Write: Write{Kind: DeleteTask, ID: name}, Summary: fmt.Sprintf("deleted %q (cannot be undone)", name)})
	}
	// The answer comes with an Undo button: that these stay deleted is
	// said, as each one's summary says it.
	if got, want := tr.Report(), "Deleted 4 tasks (cannot be undone)."; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReportNamesEveryProjectCreated(t *testing.T) {
	var tr Transcript
	names := []string{"A", "B", "C", "D", "E", "F", "G", "H"}
	for _, n := range names {
		tr.Journal = append(tr.Journal, Applied{Write: Write{Kind: AddProject, Name: n}, Summary: fmt.Sprintf("created project %q", n)})
	}
	for _, n := range names {
		tr.Journal = append(tr.Journal, Applied{Write: Write{Kind: MoveTask, ID: "task " + n}, Summary: fmt.Sprintf(`moved "task %s" to %s`, n, n), Dest: n})
	}
	// Six destinations are named, marked new; the two new projects
	// past them are still said to have been created.
	got := tr.Report()
	for _, want := range []string{"1 to F (new)", "2 more to 2 other places", "created 2 projects (G, H)"} {
		if !strings.Contains(strings.ToLower(got), strings.ToLower(want)) {
			t.Errorf("report %q lacks %q", got, want)
		}
	}
}
