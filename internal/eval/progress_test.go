package eval

import (
	"bytes"
	"strings"
	"testing"
)

// TestEvalProgressOffATerminal: on a pipe or in a log, progress is a
// line per failed attempt and one per tenth of the attempts, the last
// included: 69 attempts printed 69 lines before the table.
func TestEvalProgressOffATerminal(t *testing.T) {
	var errOut bytes.Buffer
	progress := PrintProgress(&errOut)
	for i := 1; i <= 69; i++ {
		progress(Progress{Done: i, Total: 69, Passed: i - min(i/30, 1), Task: "task", Attempt: 1, Pass: i != 30})
	}
	progress(Progress{})
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) > 12 {
		t.Errorf("%d progress lines for 69 attempts:\n%s", len(lines), errOut.String())
	}
	if !strings.Contains(errOut.String(), "eval: 30/69 attempts, 29 passed; task #1 FAIL") {
		t.Errorf("the failed attempt is not shown:\n%s", errOut.String())
	}
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, "eval: 69/69 attempts, 68 passed") {
		t.Errorf("the last line is %q, want the final count", last)
	}
}
