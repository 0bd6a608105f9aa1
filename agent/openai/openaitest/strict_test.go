package openaitest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// Verdicts are remembered by the exact bytes of a schema, within
// maxChecked bytes: a schema one byte away from a good one is checked on
// its own, and verdicts stay right once the memory has started over.
func TestCheckStrictRemembersWithinItsBound(t *testing.T) {
	good := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	bad := strings.Replace(good, `"required":["a"]`, `"required":[""]`, 1)
	pad := strings.Repeat("x", 64<<10)
	for i := range 2 * maxChecked / len(pad) {
		// Distinct schemas of 64 KiB fill the memory twice over.
		schema := json.RawMessage(fmt.Sprintf(`{"description":"%s%d",%s`, pad, i, good[1:]))
		if msg := checkStrict(schema); msg != "" {
			t.Fatalf("padded schema %d: %q", i, msg)
		}
		for range 2 {
			if msg := checkStrict(json.RawMessage(good)); msg != "" {
				t.Fatalf("good schema: %q", msg)
			}
			if msg := checkStrict(json.RawMessage(bad)); !strings.Contains(msg, "Missing 'a'") {
				t.Fatalf("bad schema: %q", msg)
			}
		}
		checkedMu.Lock()
		n := checkedBytes
		checkedMu.Unlock()
		if n > maxChecked {
			t.Fatalf("%d bytes of schemas remembered, more than %d", n, maxChecked)
		}
	}
}
