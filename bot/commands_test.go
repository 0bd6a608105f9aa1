package bot

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tidybot/tidybot/agent"
)

func TestNormalizeCommand(t *testing.T) {
	for _, tt := range []struct {
		cmd, text         string
		wantCmd, wantText string
	}{
		{"tidy", "undo", "undo", ""},
		{"tidy", " Usage ", "usage", ""},
		{"tidy", "cancel", "cancel", ""},
		{"tidy", "reset", "reset", ""},
		{"tidy", "help", "help", ""},
		{"tidy", "", "help", ""},
		{"tidy", "inbox", "tidy-inbox", ""},
		{"tidy", "/undo", "undo", ""},
		{"tidy", "frobnicate now", "tidy frobnicate", "frobnicate now"},
		{"undo", "", "undo", ""},
		{"tidy-inbox", "", "tidy-inbox", ""},
		{"", "undo", "", "undo"}, // text is not a command here (see bareCommand)
	} {
		got := normalizeCommand(Incoming{Command: tt.cmd, Text: tt.text})
		if got.Command != tt.wantCmd || got.Text != tt.wantText {
			t.Errorf("normalizeCommand(%q, %q) = %q, %q; want %q, %q", tt.cmd, tt.text, got.Command, got.Text, tt.wantCmd, tt.wantText)
		}
	}
}

// TestHelpPerPlatform: /help names the commands as they are typed on the
// platform it answers on.
func TestHelpPerPlatform(t *testing.T) {
	h := newEngineHarness(t)
	h.say(t, Incoming{Platform: "telegram", ChatID: "42", UserID: "42", DM: true, Command: "help"})
	tg := h.tg.last().Text
	h.say(t, Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", DM: true, Command: "help"})
	sl := h.slack.last().Text
	for _, c := range []struct {
		platform, got string
		want, notWant []string
	}{
		{"telegram", tg, []string{"\n/undo:", "\n/cancel:", "\n/help:"}, []string{"/tidy undo"}},
		{"slack", sl, []string{"\n/tidy-inbox:", "\n/tidy undo:", "\n/tidy cancel:", "\n/tidy reset:", "\n/tidy help:"}, []string{"\n/undo", "\n/cancel"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.got, w) {
				t.Errorf("%s help lacks %q:\n%s", c.platform, w, c.got)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(c.got, w) {
				t.Errorf("%s help says %q:\n%s", c.platform, w, c.got)
			}
		}
	}
}

// TestTidySubcommands sends Slack's one /tidy command with each
// subcommand, as the adapter maps it (Command "tidy", Text the rest).
func TestTidySubcommands(t *testing.T) {
	h := newEngineHarness(t)
	slack := func(text string) string {
		h.say(t, Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", DM: true, Command: "tidy", Text: text})
		return h.slack.last().Text
	}
	if got := slack("help"); !strings.Contains(got, "/tidy undo:") || strings.Contains(got, "\n/undo") {
		t.Errorf("/tidy help = %q, want the commands as Slack types them", got)
	}
	if got := slack(""); !strings.Contains(got, "Commands:") {
		t.Errorf("/tidy = %q, want the help", got)
	}
	if got := slack("undo"); got != "There is nothing to undo here." {
		t.Errorf("/tidy undo = %q", got)
	}
	if got := slack("cancel"); got != "Nothing is running here." {
		t.Errorf("/tidy cancel = %q", got)
	}
	if got := slack("usage"); !strings.Contains(got, "over 0 runs.") {
		t.Errorf("/tidy usage = %q", got)
	}
	if got := slack("reset"); !strings.Contains(got, "I forgot our conversation here.") {
		t.Errorf("/tidy reset = %q", got)
	}
	if got := slack("bogus"); !strings.HasPrefix(got, "I don't know /tidy bogus.") {
		t.Errorf("/tidy bogus = %q", got)
	}
	h.say(t, Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", DM: true, Text: "move the lists home"})
	if got := slack("undo"); !strings.HasPrefix(got, "↩️ Undid 2 of 2 changes") {
		t.Errorf("/tidy undo after a move = %q", got)
	}
	if got := h.tasks.contents(); got != "Old shopping list@inbox, Old packing list@inbox" {
		t.Errorf("tasks after /tidy undo: %q", got)
	}
	if n := len(h.model.requests()); n != 2 {
		t.Errorf("model calls = %d, want the move's 2: a subcommand reached the model", n)
	}
}

// TestBareCommandWords: in a DM, a message that is exactly a command word
// is that command; a longer message, a group message, or the answer to an
// open question is text.
func TestBareCommandWords(t *testing.T) {
	h := newEngineHarness(t)
	h.say(t, msg("move the lists home", ""))
	h.say(t, msg("Undo", ""))
	if got := h.tg.last().Text; !strings.HasPrefix(got, "↩️ Undid 2 of 2 changes") {
		t.Errorf("\"Undo\" in a DM = %q", got)
	}
	h.say(t, msg("usage.", ""))
	if got := h.tg.last().Text; !strings.Contains(got, "over 1 run.") {
		t.Errorf("\"usage.\" in a DM = %q", got)
	}
	h.say(t, msg("help", ""))
	if got := h.tg.last().Text; !strings.Contains(got, "Commands:") {
		t.Errorf("\"help\" in a DM = %q", got)
	}
	h.say(t, msg("undo the last thing please", ""))
	if got := h.tg.last().Text; got != "You said: undo the last thing please" {
		t.Errorf("a longer message = %q, want it to go to the model", got)
	}
	h.say(t, groupMsg("42", "usage"))
	if got := h.tg.last().Text; got != "You said: usage" {
		t.Errorf("\"usage\" in a group = %q, want text (bare words are for DMs)", got)
	}
	// With a confirmation open, "cancel" answers it (a no), and the
	// run goes on to its answer.
	h.say(t, msg("delete the old lists", ""))
	h.say(t, msg("cancel", ""))
	if got := h.tg.last().Text; got != "OK, nothing deleted." {
		t.Errorf("\"cancel\" with a confirmation open = %q", got)
	}
}

// TestUndoButton: a run that wrote ends with an Undo button that only
// its asker may press; the press is answered, is /undo, and an earlier
// run's button does not skip a later run's changes.
func TestUndoButton(t *testing.T) {
	h := newEngineHarness(t)
	h.say(t, msg("hello", ""))
	if b := actions(h.tg.last().Buttons); len(b) != 0 {
		t.Errorf("a run that wrote nothing has buttons: %+v", b)
	}
	h.say(t, msg("delete the old lists", ""))
	h.say(t, msg("yes", ""))
	if got := h.tg.last(); got.Text != "Deleted." || len(actions(got.Buttons)) != 0 {
		t.Errorf("a run whose changes cannot be undone = %+v, want no Undo button", got)
	}
	h.tasks.mu.Lock()
	h.tasks.tasks = newMemTasks("Old shopping list", "Old packing list").tasks
	h.tasks.mu.Unlock()
	h.say(t, msg("move the lists home", ""))
	first := h.tg.last()
	first.Buttons = actions(first.Buttons)
	if len(first.Buttons) != 1 || first.Buttons[0].Label != "↩️ Undo" || len(first.Buttons[0].Data) > 64 {
		t.Fatalf("answer = %+v, want one Undo button", first)
	}
	h.say(t, msg("move the packing list back", ""))
	second := h.tg.last()
	press := func(b Button, ref string) {
		h.say(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", DM: true, Button: b.Data, ButtonRef: ref, MessageID: ref})
	}
	press(first.Buttons[0], "cb1")
	if got := h.tg.last().Text; got != "A later run changed things since; /undo reverts the latest run first." {
		t.Errorf("the earlier run's Undo = %q", got)
	}
	if got := h.tasks.contents(); got != "Old shopping list@home, Old packing list@inbox" {
		t.Fatalf("tasks = %q: the earlier Undo changed something", got)
	}
	press(second.Buttons[0], "cb2")
	if got := h.tasks.contents(); got != "Old shopping list@home, Old packing list@home" {
		t.Errorf("tasks after the later run's Undo = %q", got)
	}
	press(second.Buttons[0], "cb3")
	press(first.Buttons[0], "cb4")
	if got := h.tasks.contents(); got != "Old shopping list@inbox, Old packing list@inbox" {
		t.Errorf("tasks after both Undos = %q", got)
	}
	if got := joined(h.tg.answered); !strings.Contains(got, "cb2: Undoing…") || !strings.Contains(got, "cb3: Already undone.") || !strings.Contains(got, "cb4: Undoing…") {
		t.Errorf("presses answered: %s", got)
	}
}

// TestLongMessageIsClipped: a message over MaxMessage characters is cut
// before it is stored or sent to the model, and the user is told.
func TestLongMessageIsClipped(t *testing.T) {
	h := newEngineHarness(t)
	long := strings.Repeat("é", 900_000)
	h.say(t, msg(long, ""))
	if got := joined(h.tg.texts()); !strings.Contains(got, "Your message is 900000 characters long; I only read the first 8000.") {
		t.Errorf("no note to the user: %.300s", got)
	}
	for _, r := range h.model.requests() {
		for _, m := range r.Messages {
			if n := utf8.RuneCountInString(m.Content); n > MaxMessage+100 {
				t.Fatalf("the model got a %d-character message", n)
			}
		}
	}
	for _, m := range h.store.allMessages() {
		if n := utf8.RuneCountInString(m.Text); m.Role == RoleUser && n > MaxMessage {
			t.Errorf("stored a %d-character message", n)
		}
	}
}

// limited is a fake platform declaring a cap.
type limited struct {
	*fakePlatform
	max int
}

func (l limited) MaxText() int { return l.max }

// TestAnswerIsCappedPerPlatform: a 1 MB answer or question is cut to the
// platform's cap (the default where it declares none) and ends with "…".
func TestAnswerIsCappedPerPlatform(t *testing.T) {
	for _, tt := range []struct {
		name string
		max  int // -1: the platform declares none
		want int
	}{
		{"default", -1, DefaultMaxText},
		{"slack-like", 3000, 3000},
		{"no limit", 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newEngineHarness(t)
			if tt.max >= 0 {
				h.bot.AddPlatform(limited{h.tg, tt.max})
			}
			for _, instr := range []string{"say a lot", "ask a lot"} {
				if tt.max >= 0 && instr == "say a lot" {
					instr = "say quite a lot" // the 1 MB answer once is enough
				}
				h.say(t, msg(instr, ""))
				got := h.tg.last().Text
				n := utf8.RuneCountInString(got)
				if tt.max == 0 {
					if n < 99_999 || strings.HasSuffix(got, "…") {
						t.Errorf("%s: sent %d characters, want it whole", instr, n)
					}
					continue
				}
				if n > tt.want || n < tt.want*9/10 {
					t.Errorf("%s: sent %d characters, want about %d", instr, n, tt.want)
				}
				if !strings.HasSuffix(got, "…") {
					t.Errorf("%s: a cut text does not end with …: %q", instr, got[len(got)-20:])
				}
				if tt.max > 0 {
					continue
				}
				for _, m := range h.store.allMessages() {
					if n := utf8.RuneCountInString(m.Text); n > tt.want {
						t.Errorf("stored a %d-character message", n)
					}
				}
			}
		})
	}
}

// TestDoneListSaysHowToUndoOnThePlatform: a cancelled run's list of
// changes is the agent's, with the undo command as typed there.
func TestDoneListSaysHowToUndoOnThePlatform(t *testing.T) {
	h := newEngineHarness(t)
	tr := &agent.Transcript{Journal: []agent.Applied{{Summary: `moved "Buy cake" to Birthday`}}}
	for platform, want := range map[string]string{
		"slack":    "Done so far:\n• moved \"Buy cake\" to Birthday\n/tidy undo reverts it.",
		"telegram": "Done so far:\n• moved \"Buy cake\" to Birthday\n/undo reverts it.",
	} {
		if got := h.bot.doneList(platform, tr); got != want {
			t.Errorf("%s: got %q, want %q", platform, got, want)
		}
	}
	if got := h.bot.doneList("slack", &agent.Transcript{}); got != "Nothing was changed." {
		t.Errorf("no writes: got %q", got)
	}
}

// TestCommandTable: every command has a name, a help line and a handler,
// and no word names two commands.
func TestCommandTable(t *testing.T) {
	seen := map[string]string{}
	for _, c := range Commands(true) {
		if c.Name == "" || c.Help == "" || c.handle == nil {
			t.Errorf("%+v: want a name, a help line and a handler", c)
		}
		for _, w := range append([]string{c.Name}, c.Aliases...) {
			if other, dup := seen[w]; dup {
				t.Errorf("%q names both %s and %s", w, other, c.Name)
			}
			seen[w] = c.Name
			if got, ok := LookupCommand(strings.ToUpper(w)); !ok || got.Name != c.Name {
				t.Errorf("LookupCommand(%q) = %q, %v; want %s", strings.ToUpper(w), got.Name, ok, c.Name)
			}
		}
	}
	if _, ok := LookupCommand(""); ok {
		t.Error("the empty word is a command")
	}
}

// TestEveryCommandIsAnsweredInItsMode: each command of the table is
// answered in its mode, as a command the bot knows (its help line in
// /help), and a team command in personal mode is unknown.
func TestEveryCommandIsAnsweredInItsMode(t *testing.T) {
	for _, team := range []bool{false, true} {
		var h *harness
		if team {
			h = newTeamHarness(t, &fakeAccounts{agents: map[string]*mockAgent{"slack:U1": {}}}, Config{AllowedUsers: []string{"slack:U1"}})
		} else {
			h = startHarness(t, &mockAgent{}, &fakePlatform{name: "slack", interval: time.Second}, Config{Workers: 2, AllowedUsers: []string{"slack:U1"}})
		}
		ask := func(cmd string) string {
			before := len(h.plat.texts())
			h.handle(t, Incoming{Platform: "slack", ChatID: "D1", UserID: "U1", DM: true, Command: cmd})
			h.idle(t)
			if texts := h.plat.texts(); len(texts) > before {
				return texts[len(texts)-1]
			}
			return ""
		}
		help := ask("help")
		for _, c := range Commands(true) {
			line := "\n/" + c.Name + ": " + c.Help + "\n"
			got := ask(c.Name)
			switch known := team || !c.TeamOnly; {
			case !known && !strings.HasPrefix(got, "I don't know /"+c.Name+"."):
				t.Errorf("team %v: /%s = %q, want it unknown", team, c.Name, got)
			case !known && strings.Contains(help, line):
				t.Errorf("team %v: the help lists /%s:\n%s", team, c.Name, help)
			case known && (got == "" || strings.HasPrefix(got, "I don't know")):
				t.Errorf("team %v: /%s = %q, want an answer", team, c.Name, got)
			case known && !strings.Contains(help, line):
				t.Errorf("team %v: the help lacks %q:\n%s", team, line, help)
			}
		}
	}
}
