package storetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tidybot/tidybot/bot"
)

// testClearedSettingLeavesNoRow: SetSetting with "" deletes the setting
// (bot.Store's contract), so records cleared once per answer (a
// preview's stream:<run id>) do not pile up as empty rows.
func testClearedSettingLeavesNoRow(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	if err := s.SetSetting(ctx, "stream:r1", `{"chat_id":"D1"}`); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Setting(ctx, "stream:r1"); err != nil || v != `{"chat_id":"D1"}` {
		t.Fatalf("Setting = %q, %v", v, err)
	}
	if err := s.SetSetting(ctx, "stream:r1", ""); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Setting(ctx, "stream:r1"); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("Setting after clearing = %q, %v; want ErrNotFound", v, err)
	}
}

// testCommitSetsFields: a Change's Fields set fields of a setting that
// holds a JSON object in its transaction, keeping the others (a
// person's settings changed meanwhile), and create it when absent.
func testCommitSetsFields(t *testing.T, open Open) {
	s, reopen := open(t)
	ctx := t.Context()
	field := func(key, name, v string) bot.Change {
		return bot.Change{Fields: map[string]map[string]json.RawMessage{key: {name: json.RawMessage(v)}}}
	}
	if err := s.Commit(ctx, field("person:slack:U1", "conversation", `"slack:D1:"`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx, "person:slack:U2", `{"confirm":"never","conversation":"slack:D0:"}`); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, field("person:slack:U2", "conversation", `"slack:D2:"`)); err != nil {
		t.Fatal(err)
	}
	s = reopen()
	for key, want := range map[string]string{
		"person:slack:U1": `{"conversation":"slack:D1:"}`,
		"person:slack:U2": `{"confirm":"never","conversation":"slack:D2:"}`,
	} {
		if v, err := s.Setting(ctx, key); err != nil || v != want {
			t.Errorf("%s = %q, %v; want %s", key, v, err, want)
		}
	}
	check(t, s)
}
