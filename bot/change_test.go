package bot

import (
	"encoding/json"
	"testing"
)

func TestMergeFields(t *testing.T) {
	conv := map[string]json.RawMessage{"conversation": json.RawMessage(`"slack:D1:"`)}
	for _, tt := range []struct {
		name, old, want string
		changed         bool
	}{
		{"none yet", "", `{"conversation":"slack:D1:"}`, true},
		{"other fields kept", `{"confirm":"never","conversation":"slack:D0:"}`, `{"confirm":"never","conversation":"slack:D1:"}`, true},
		{"already so: not written", `{"conversation":"slack:D1:","lang":"Nederlands"}`, `{"conversation":"slack:D1:","lang":"Nederlands"}`, false},
		{"not an object: left alone", `"08:00"`, `"08:00"`, false},
		{"unreadable: left alone", `{"confirm":`, `{"confirm":`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, changed, err := MergeFields(tt.old, conv)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want || changed != tt.changed {
				t.Errorf("MergeFields(%s) = %s, %t; want %s, %t", tt.old, got, changed, tt.want, tt.changed)
			}
		})
	}
	if _, _, err := MergeFields("", map[string]json.RawMessage{"x": json.RawMessage(`{`)}); err == nil {
		t.Error("a field that is not JSON: no error")
	}
}

// TestConversationRecordedWithTheMessage: a message in private records
// its conversation (where autopilot and the digest post) in the
// transaction that stores it, keeping the person's other settings; the
// run it starts writes none of them.
func TestConversationRecordedWithTheMessage(t *testing.T) {
	h := newHarness(t, &mockAgent{})
	ctx := t.Context()
	if err := h.bot.SaveSettings(ctx, "telegram", "42", PersonSettings{Confirm: "never", Conversation: "telegram:old:"}); err != nil {
		t.Fatal(err)
	}
	var recorded, others int
	h.store.onCommit = func(c Change) {
		if c.Fields[personKey("telegram", "42")] == nil {
			return
		}
		if c.Job != nil {
			recorded++
		} else {
			others++
		}
	}
	h.handle(t, msg("hello", "e1"))
	h.idle(t)
	if recorded != 1 || others != 0 {
		t.Errorf("conversation written with the message %d times, elsewhere %d; want 1 and 0", recorded, others)
	}
	ps, err := h.bot.Settings(ctx, "telegram", "42")
	if err != nil {
		t.Fatal(err)
	}
	if want := (PersonSettings{Confirm: "never", Conversation: "telegram:c1:"}); ps != want {
		t.Errorf("settings %+v, want %+v", ps, want)
	}
}
