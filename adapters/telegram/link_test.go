package telegram_test

import (
	"testing"

	"github.com/tidybot/tidybot/bot"
)

func TestDetailsLinkOnlyForTheAsker(t *testing.T) {
	a, srv := newAdapter(t, "")
	link := &bot.Link{Label: "Details", URL: "https://bot.example.com/runs/r1?sig=s", UserID: "42"}

	// A private chat (its id is the user's): the button is on the answer,
	// under the answer's own buttons.
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "42", Text: "Done.", Buttons: []bot.Button{{Label: "Undo", Data: "undo"}}, Link: link}); err != nil {
		t.Fatal(err)
	}
	ms := srv.Messages(42)
	if len(ms) != 1 || len(ms[0].URLs) != 2 || ms[0].URLs[0] != "" || ms[0].URLs[1] != link.URL || ms[0].Labels[1] != "Details" {
		t.Fatalf("private chat: %+v", ms)
	}

	// A group: the answer there has no link; the asker gets it privately.
	if _, err := a.Send(t.Context(), bot.Outgoing{ChatID: "-100", Text: "Done.", Link: link}); err != nil {
		t.Fatal(err)
	}
	if g := srv.Messages(-100); len(g) != 1 || len(g[0].URLs) != 0 {
		t.Errorf("group: %+v", g)
	}
	ms = srv.Messages(42)
	if len(ms) != 2 || len(ms[1].URLs) != 1 || ms[1].URLs[0] != link.URL {
		t.Errorf("private link: %+v", ms)
	}
}
