package eval

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestWriteTableOneFormatPerFigure: pass^k is printed as pass^1 is, with
// two decimals, per task and in total (it read "1" in a task's row and
// "1.00" in the total).
func TestWriteTableOneFormatPerFigure(t *testing.T) {
	r := Report{Model: "m", Protocol: "tools", K: 2, Tasks: []TaskResult{
		{Name: "solved", Attempts: []Attempt{{Pass: true}, {Pass: true}}},
		{Name: "flaky", Attempts: []Attempt{{Pass: true}, {Pass: false, Reason: "moved the wrong task"}}},
	}}
	r.score(time.Second)
	var b bytes.Buffer
	if err := r.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	table, _, _ := strings.Cut(b.String(), "Failures:")
	for _, line := range strings.Split(table, "\n") {
		if f := strings.Fields(line); len(f) > 2 {
			rows[f[0]] = f
		}
	}
	for name, want := range map[string][2]string{"solved": {"1.00", "1.00"}, "flaky": {"0.50", "0.00"}, "TOTAL": {"0.75", "0.50"}} {
		f := rows[name]
		if name == "TOTAL" && len(f) > 6 {
			f = append([]string{f[0]}, f[5:]...) // TOTAL (2 tasks × 2)
		}
		if len(f) < 3 || f[1] != want[0] || f[2] != want[1] {
			t.Errorf("row %s: %v, want pass^1 %s pass^2 %s\n%s", name, f, want[0], want[1], b.String())
		}
	}
}
