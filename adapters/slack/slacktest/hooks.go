package slacktest

import (
	"context"
	"testing"
	"time"
)

// Hooks is internal/hooks.Store (adapters/slack.Hooks), the store of
// response_urls, declared again: a fake imports nothing of the project
// (DESIGN.md §1, internal/layout).
type Hooks interface {
	SaveHook(ctx context.Context, channel, person, url string, expires time.Time) error
	TakeHook(ctx context.Context, channel, person, run string, within int, now time.Time) (url string, ok bool, err error)
}

// TestHooks checks an implementation of adapters/slack.Hooks against its
// contract, written once for all of them (the adapter's memory,
// PostgreSQL): save and take may be two replicas of one store. What is
// posted through a response_url is shown only to the person whose
// command or press gave it ("visible only to the user who issued the
// command", api.slack.com/interactivity/slash-commands), so a
// response_url is its person's, and once a run answers through it, that
// run's (issue 33): another person's command or press in the channel
// neither replaces nor takes it.
func TestHooks(t *testing.T, save, take Hooks) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	exp := now.Add(30 * time.Minute)
	keep := func(person, url string) {
		t.Helper()
		if err := save.SaveHook(ctx, "D9", person, url, exp); err != nil {
			t.Fatal(err)
		}
	}
	took := func(person, run string, within int) string {
		t.Helper()
		u, ok, err := take.TakeHook(ctx, "D9", person, run, within, now)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ""
		}
		return u
	}
	keep("U1", "alice-1")
	if got := took("U1", "r1", 5); got != "alice-1" { // r1 binds it
		t.Fatalf("U1's run took %q, want alice-1", got)
	}
	keep("U2", "bob-1") // another person's command, 0.7 s later
	for _, c := range []struct {
		person, run string
		within      int
		want        string
	}{
		{"U1", "r1", 5, "alice-1"}, // r1 keeps its own, never U2's newer one
		{"U2", "r2", 5, "bob-1"},   // U2's run binds U2's
		{"U2", "", 5, ""},          // bound ones are their runs' only
		{"U1", "r3", 5, ""},        // U1's other run: none of U1's left unbound
		{"", "r1", 5, ""},          // nobody in particular: none
		{"U1", "r1", 3, "alice-1"}, // an edit, the 3rd use
		{"U1", "r1", 3, ""},        // an edit leaves the last 2
		{"U1", "r1", 5, "alice-1"}, // to the question and the answer
		{"U1", "r1", 5, "alice-1"},
		{"U1", "r1", 5, ""}, // 5 uses: none more
	} {
		if got := took(c.person, c.run, c.within); got != c.want {
			t.Errorf("%s, run %q, within %d took %q, want %q", c.person, c.run, c.within, got, c.want)
		}
	}
	keep("U1", "alice-2") // U1's press
	if got := took("U1", "", 5); got != "alice-2" {
		t.Errorf("U1's reply to the press took %q, want alice-2", got)
	}
	if got := took("U1", "r1", 5); got != "alice-2" {
		t.Errorf("r1, its own used up, took %q, want U1's newest unbound, alice-2", got)
	}
	if got := took("U1", "", 5); got != "" {
		t.Errorf("U1's reply took %q, a response_url r1 holds now", got)
	}
	if _, ok, err := take.TakeHook(ctx, "D9", "U2", "r2", 5, exp); ok || err != nil {
		t.Errorf("an expired response_url: ok %v, err %v", ok, err)
	}
}
