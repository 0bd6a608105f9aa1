package agent

import (
	"os"
	"strings"
	"testing"
)

// TestPolicyDocsMatchThePolicies: docs/security.md's policy table and
// docs/using.md's statement of what autopilot may do are the policies'
// data rendered (PolicyTable, AutopilotLimits), between their markers:
// the docs say exactly what the engine enforces.
func TestPolicyDocsMatchThePolicies(t *testing.T) {
	for _, tc := range []struct{ file, marker, want string }{
		{"../docs/security.md", "policy-table", PolicyTable()},
		{"../docs/using.md", "autopilot-limits", AutopilotLimits()},
	} {
		b, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		page := string(b)
		start, end := "<!-- "+tc.marker+" (generated from agent/policy.go) -->\n", "<!-- /"+tc.marker+" -->"
		i, j := strings.Index(page, start), strings.Index(page, end)
		if i < 0 || j < i {
			t.Errorf("%s lacks the block %s…%s", tc.file, start, end)
			continue
		}
		if got := page[i+len(start) : j]; got != tc.want {
			t.Errorf("%s's %s block is\n%s\nwant\n%s", tc.file, tc.marker, got, tc.want)
		}
	}
}
