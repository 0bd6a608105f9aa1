package bot

import (
	"strings"
	"testing"
)

func TestConfirmVerdict(t *testing.T) {
	for _, tt := range []struct {
		text string
		want verdict
	}{
		{"yes", yes}, {"Yes", yes}, {"YES!", yes}, {"y", yes}, {"ok", yes}, {"Okay.", yes}, {"sure", yes},
		{"do it", yes}, {"Do it!", yes}, {"confirm", yes}, {"go ahead", yes}, {"👍", yes}, {"👍🏽", yes}, {"yes please", yes},
		{"yes, do it", yes}, {"Sure, go ahead.", yes}, {" yes ", yes}, {"✅", yes},
		{"no", no}, {"No.", no}, {"n", no}, {"cancel", no}, {"stop", no}, {"don't", no}, {"Don’t", no}, {"dont", no},
		{"👎", no}, {"no thanks", no}, {"no, cancel", no}, {"nope", no},
		{"yesterday's list is fine, keep it", neither},
		{"yes, but only the first one", neither},
		{"yes no", neither},
		{"okay but not the second", neither},
		{"nothing", neither}, {"no way I'd keep the first", neither}, {"please", neither}, {"", neither}, {"1", neither},
		{"yes?", neither}, {"ok?", neither}, {"Sure?", neither}, {"¿sí?", neither}, {"no?", neither},
	} {
		if got := confirmVerdict(tt.text); got != tt.want {
			t.Errorf("confirmVerdict(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}

// TestConfirmationRepliesThroughTheAgent types each reply to "Delete 2
// tasks?" through the bot and the real engine: only a yes deletes, a no
// keeps them and the model hears no, and anything else keeps them and the
// model hears the user's own words.
func TestConfirmationRepliesThroughTheAgent(t *testing.T) {
	const kept = "Old shopping list@inbox, Old packing list@inbox"
	for _, tt := range []struct {
		reply    string
		tasks    string // left afterwards
		answer   string // the bot's last message
		modelGot string // in an observation
	}{
		{"yes", "", "Deleted.", ""},
		{"Yes!", "", "Deleted.", ""},
		{"ok", "", "Deleted.", ""},
		{"sure", "", "Deleted.", ""},
		{"do it", "", "Deleted.", ""},
		{"confirm", "", "Deleted.", ""},
		{"Go ahead.", "", "Deleted.", ""},
		{"👍", "", "Deleted.", ""},
		{"y", "", "Deleted.", ""},
		{"no", kept, "OK, nothing deleted.", "said no"},
		{"n", kept, "OK, nothing deleted.", "said no"},
		{"cancel", kept, "OK, nothing deleted.", "said no"},
		{"stop", kept, "OK, nothing deleted.", "said no"},
		{"don't", kept, "OK, nothing deleted.", "said no"},
		{"👎", kept, "OK, nothing deleted.", "said no"},
		{"yesterday's list is fine, keep it", kept, "I kept both lists.", "yesterday's list is fine, keep it"},
		{"nope, not those", kept, "I kept both lists.", "nope, not those"},
		{"yes?", kept, "I kept both lists.", "yes?"},
		{"ok?", kept, "I kept both lists.", "ok?"},
	} {
		t.Run(tt.reply, func(t *testing.T) {
			h := newEngineHarness(t)
			h.say(t, msg("delete the old lists", ""))
			q := h.tg.last()
			if !strings.Contains(q.Text, "Delete \"Old shopping list\", \"Old packing list\"?") || len(q.Buttons) != 2 {
				t.Fatalf("confirmation = %+v", q)
			}
			h.say(t, msg(tt.reply, ""))
			if got := h.tasks.contents(); got != tt.tasks {
				t.Errorf("tasks left = %q, want %q", got, tt.tasks)
			}
			if got := h.tg.last().Text; got != tt.answer {
				t.Errorf("answer = %q, want %q", got, tt.answer)
			}
			if tt.modelGot != "" && !strings.Contains(h.model.observations(), tt.modelGot) {
				t.Errorf("the model never heard %q:\n%s", tt.modelGot, h.model.observations())
			}
			if got := joined(h.tg.edits); !strings.Contains(got, "This cannot be undone.\n→ ") {
				t.Errorf("the buttons did not give way to the reply: %s", got)
			}
		})
	}
}

// TestConfirmationReplyThatIsNotAYesIsReplanned: "yes, but only the first
// one" deletes nothing; the model hears it, plans a smaller delete, which
// is gated again, and only that one goes once confirmed.
func TestConfirmationReplyThatIsNotAYesIsReplanned(t *testing.T) {
	h := newEngineHarness(t)
	h.say(t, msg("delete the old lists", ""))
	h.say(t, msg("yes, but only the first one", ""))
	if got := h.tasks.contents(); got != "Old shopping list@inbox, Old packing list@inbox" {
		t.Fatalf("tasks after a qualified yes = %q: something was deleted", got)
	}
	if !strings.Contains(h.model.observations(), "yes, but only the first one") {
		t.Errorf("the model did not hear the user's words:\n%s", h.model.observations())
	}
	q := h.tg.last()
	if q.Text != "Delete \"Old shopping list\"? This cannot be undone." || len(q.Buttons) != 2 || q.Buttons[0].Label != "Delete 1 task" {
		t.Fatalf("second confirmation = %+v", q)
	}
	h.say(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Button: q.Buttons[0].Data, ButtonRef: "cb1"})
	if got := h.tasks.contents(); got != "Old packing list@inbox" {
		t.Errorf("tasks after confirming the first = %q", got)
	}
	if got := h.tg.last().Text; got != "Deleted." {
		t.Errorf("answer = %q", got)
	}
}

// FuzzConfirmVerdict: no reply panics, and a reply with a qualification
// added is never a yes.
func FuzzConfirmVerdict(f *testing.F) {
	for _, s := range []string{"yes", "ok 👍", "Yes!", "no", "yesterday", "do it please", "y", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_ = confirmVerdict(s)
		for _, more := range []string{", but only the first one", " except the second", " later"} {
			if confirmVerdict(s+more) == yes {
				t.Errorf("confirmVerdict(%q) = yes", s+more)
			}
		}
	})
}
