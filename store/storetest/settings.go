package storetest

import (
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
