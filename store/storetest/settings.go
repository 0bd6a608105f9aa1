package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
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

// testSettingOrSetConcurrentlyOnce: callers keeping a value under one
// key at once, each its own (replicas generating the run link key at
// first start), all get the value kept first, and it stays.
func testSettingOrSetConcurrentlyOnce(t *testing.T, open Open) {
	s, reopen := open(t)
	ctx := t.Context()
	const n = 32
	got := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := s.SettingOrSet(ctx, "run_link_key", fmt.Sprint("key", i))
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	kept := got[0]
	if !strings.HasPrefix(kept, "key") {
		t.Fatalf("SettingOrSet = %q, want one of the values given", kept)
	}
	for i, v := range got {
		if v != kept {
			t.Errorf("caller %d got %q, caller 0 %q: want the same value", i, v, kept)
		}
	}
	s = reopen()
	if v, err := s.SettingOrSet(ctx, "run_link_key", "another"); err != nil || v != kept {
		t.Errorf("SettingOrSet after a restart = %q, %v; want %q", v, err, kept)
	}
	if v, err := s.Setting(ctx, "run_link_key"); err != nil || v != kept {
		t.Errorf("Setting = %q, %v; want %q", v, err, kept)
	}
	for _, key := range []string{bot.PendingPrefix + "u1", "empty"} {
		value := `{"text":"hi"}`
		if key == "empty" {
			value = ""
		}
		if _, err := s.SettingOrSet(ctx, key, value); err == nil {
			t.Errorf("SettingOrSet(%q, %q) kept it, want an error", key, value)
		}
	}
	check(t, s)
}

// testSettingsWithPrefix: SettingsWithPrefix returns the settings under
// a prefix, sealed ones (a pending request) opened, a cleared one not
// at all, and nothing under another prefix; after a restart too.
func testSettingsWithPrefix(t *testing.T, open Open) {
	s, reopen := open(t)
	ctx := t.Context()
	for k, v := range map[string]string{
		"person:telegram:1":  `{"digest":"08:00"}`,
		"person:slack:U2":    `{"autopilot":true}`,
		"person:slack:U3":    `{"lang":"Dutch"}`,
		"persona":            "not a person",
		"pending:telegram:1": `{"text":"buy milk"}`,
		"autopilot-people":   `["slack:U2"]`,
	} {
		if err := s.SetSetting(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.SetSetting(ctx, "person:slack:U3", ""); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"person:telegram:1": `{"digest":"08:00"}`, "person:slack:U2": `{"autopilot":true}`}
	for restarted, st := range []func() Store{func() Store { return s }, reopen} {
		st := st()
		t.Logf("restarted %d times", restarted)
		got, err := st.SettingsWithPrefix(ctx, bot.PersonSettingPrefix)
		if err != nil || !maps.Equal(got, want) {
			t.Errorf("SettingsWithPrefix(person:) = %v, %v; want %v", got, err, want)
		}
		if got, err := st.SettingsWithPrefix(ctx, bot.PendingPrefix); err != nil || got["pending:telegram:1"] != `{"text":"buy milk"}` || len(got) != 1 {
			t.Errorf("SettingsWithPrefix(pending:) = %v, %v; want the sealed request opened", got, err)
		}
		if got, err := st.SettingsWithPrefix(ctx, "nobody:"); err != nil || got == nil || len(got) != 0 {
			t.Errorf("SettingsWithPrefix(nobody:) = %#v, %v; want an empty map", got, err)
		}
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

// testDeliveredForgetsThePreview: the transaction that takes a run's
// answer out of the outbox deletes the run's preview record
// (bot.StreamKey); a question's delivery leaves it (its preview was
// ended, and forgotten, before).
func testDeliveredForgetsThePreview(t *testing.T, open Open) {
	s, _ := open(t)
	ctx := t.Context()
	answer := bot.Outbound{ID: "o1", Platform: "slack", Msg: bot.Outgoing{ChatID: "D1", Text: "Done."}, RunID: "r1", Created: t0}
	question := bot.Outbound{ID: "o2", Platform: "slack", Msg: bot.Outgoing{ChatID: "D2", Text: "Which?"}, RunID: "r2", WaitKey: "k2", Created: t0}
	if err := s.Commit(ctx, bot.Change{Send: []bot.Outbound{answer, question}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"r1", "r2"} {
		if err := s.SetSetting(ctx, bot.StreamKey(id), `{"platform":"slack","chat_id":"D1","after":"1.1"}`); err != nil {
			t.Fatal(err)
		}
	}
	for _, ob := range []bot.Outbound{answer, question} {
		if err := s.Delivered(ctx, ob, "2.2"); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := s.Setting(ctx, bot.StreamKey("r1")); !errors.Is(err, bot.ErrNotFound) {
		t.Errorf("the answer's preview record after its delivery: %q, %v; want ErrNotFound", v, err)
	}
	if _, err := s.Setting(ctx, bot.StreamKey("r2")); err != nil {
		t.Errorf("the question's delivery deleted another record: %v", err)
	}
	if got, err := s.Outbox(ctx); err != nil || len(got) != 0 {
		t.Errorf("outbox = %+v, %v; want empty", got, err)
	}
}
