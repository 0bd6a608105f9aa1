package agent_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
)

// TestPartialString cuts each JSON text at every byte: what is decoded
// so far is always a beginning of the whole answer (an escape or a
// character cut in half is held back), and the whole text gives exactly
// what encoding/json decodes.
func TestPartialString(t *testing.T) {
	for _, raw := range []string{
		`{"answer":"Done."}`,
		`{ "answer" : "Line one\nLine \"two\" \\ end\t✓" }`,
		`{"answer":"emoji \ud83d\ude00 and \u00e9t\u00e9 and é"}`,
		`{"thought":"the \"answer\": is below","action":{"type":"final_answer","answer":"Filed 3 tasks \/ 2 projects"}}`,
		`{"note":{"answer":1},"answer":"second"}`,
	} {
		t.Run(raw, func(t *testing.T) { checkPartial(t, raw) })
	}
	if _, ok := agent.PartialString(`{"question":"answer"}`, "answer"); ok {
		t.Error("a value named answer was taken for the member")
	}
	if _, ok := agent.PartialString(`{"answer":null}`, "answer"); ok {
		t.Error("a null answer was taken for a string")
	}
}

func checkPartial(t *testing.T, raw string) {
	t.Helper()
	want, ok := wholeAnswer(raw)
	if !ok {
		t.Fatalf("%s has no answer", raw)
	}
	for i := 0; i <= len(raw); i++ {
		got, ok := agent.PartialString(raw[:i], "answer")
		if ok && !strings.HasPrefix(want, got) {
			t.Fatalf("cut at %d: got %q, not a beginning of %q", i, got, want)
		}
		if i == len(raw) && got != want {
			t.Fatalf("whole: got %q, want %q", got, want)
		}
	}
}

// wholeAnswer is the answer member as encoding/json finds it (at the
// top, or in "action").
func wholeAnswer(raw string) (string, bool) {
	var v struct {
		Answer any `json:"answer"`
		Action struct {
			Answer string `json:"answer"`
		} `json:"action"`
	}
	if json.Unmarshal([]byte(raw), &v) != nil {
		return "", false
	}
	if s, ok := v.Answer.(string); ok {
		return s, true
	}
	return v.Action.Answer, v.Action.Answer != ""
}

func FuzzPartialString(f *testing.F) {
	f.Add("Done.")
	f.Add("a \"b\" \\ \n ✓ \U0001F600")
	f.Fuzz(func(t *testing.T, answer string) {
		b, err := json.Marshal(map[string]string{"answer": answer})
		if err != nil {
			t.Skip()
		}
		checkPartial(t, string(b))
	})
}
