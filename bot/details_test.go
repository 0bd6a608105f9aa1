package bot

import (
	"strings"
	"testing"
)

func TestFinalMessageCarriesDetailsLinkForTheAsker(t *testing.T) {
	ag := &mockAgent{StartFn: asking("Work", "Home")}
	var linked []string
	h := startHarness(t, ag, newTelegram(), Config{Workers: 1, AllowedUsers: []string{"telegram:42"}, RunLink: func(r *Run) string {
		linked = append(linked, r.ID)
		return "https://bot.example.com/runs/" + r.ID + "?sig=s"
	}})
	h.handle(t, msg("file the dentist task", "e1"))
	h.idle(t)
	if q := h.plat.last(); q.Link != nil {
		t.Errorf("the question carries a Details link: %+v", q.Link)
	}
	h.handle(t, Incoming{Platform: "telegram", ChatID: "c1", UserID: "42", Button: h.plat.last().Buttons[1].Data, ButtonRef: "cb"})
	h.idle(t)
	final := h.plat.last()
	if final.Link == nil {
		t.Fatalf("the final message %q has no Details link", final.Text)
	}
	if final.Link.UserID != "42" || final.Link.Label != "Details" || !strings.HasPrefix(final.Link.URL, "https://bot.example.com/runs/") {
		t.Errorf("link %+v, want Details for user 42", final.Link)
	}
	if len(linked) != 1 {
		t.Errorf("RunLink called for %v, want once, for the final message", linked)
	}
}
