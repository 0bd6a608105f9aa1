package agent

import (
	"strings"
	"testing"
)

func TestParseModelTiers(t *testing.T) {
	got, err := ParseModelTiers(" fast:gpt-6-luna-mini , best:gpt-6-luna")
	if err != nil || len(got) != 2 || got[0] != (ModelTier{"fast", "gpt-6-luna-mini"}) || got[1] != (ModelTier{"best", "gpt-6-luna"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := ParseModelTiers("  "); got != nil || err != nil {
		t.Errorf("empty: %v, %v; want no tiers", got, err)
	}
	for in, want := range map[string]string{
		"fast:a,,best:b":   "tier 2 is empty",
		"fast:a,best":      `"best" is not name:model`,
		"fast:a,:b":        `":b" is not name:model`,
		"Fast:a,best:b":    `tier name "Fast"`,
		"fast:a,default:b": `"default" is taken`,
		"fast:a,fast:b":    "fast is named twice",
		"fast:a,best:a":    "tiers fast and best name the same model a",
		"fast:a":           "only one tier",
		"fast:a b,best:c":  "has a space",
		"fast:a,best:b,":   "tier 3 is empty",
	} {
		if _, err := ParseModelTiers(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}
