package agent

import (
	"strings"
	"testing"
)

func TestParseModelTiers(t *testing.T) {
	got, err := ParseModelTiers(" fast:gpt-6-luna , best:gpt-6.1-sol")
	if err != nil || len(got) != 2 || got[0] != (ModelTier{"fast", "gpt-6-luna"}) || got[1] != (ModelTier{"best", "gpt-6.1-sol"}) {
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

// The examples the errors give name models OpenAI serves (its models
// page lists gpt-6-luna, gpt-6-sol, gpt-6-astra and gpt-6.1-sol; there
// is no gpt-6-luna-mini), so that a person who copies one gets a tier
// that works.
func TestParseModelTiersExamplesNameRealModels(t *testing.T) {
	real := map[string]bool{"gpt-6-luna": true, "gpt-6-sol": true, "gpt-6-astra": true, "gpt-6.1-sol": true}
	for _, in := range []string{"fast:a,,best:b", "fast:a,best"} {
		_, err := ParseModelTiers(in)
		if err == nil {
			t.Fatalf("%q: no error", in)
		}
		_, example, ok := strings.Cut(err.Error(), "e.g. ")
		if !ok {
			t.Fatalf("%q: %v gives no example", in, err)
		}
		example = strings.TrimRight(example, ")")
		for _, part := range strings.Split(example, ",") {
			if _, model, _ := strings.Cut(part, ":"); !real[model] {
				t.Errorf("%q: the example %q names %q, not an OpenAI model", in, example, model)
			}
		}
	}
}
