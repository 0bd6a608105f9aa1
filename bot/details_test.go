package bot

import (
	"strings"
	"testing"
	"time"
)

func TestFinalMessageCarriesDetailsLinkForTheAsker(t *testing.T) {
	ag := &fakeAgent{ask: []string{"Work", "Home"}}
	h := &harness{store: newMemStore(), agent: ag, plat: &fakePlatform{name: "telegram", interval: 2 * time.Second}}
	var linked []string
	h.bot = New(h.store, ag, Config{Workers: 1, AllowedUsers: []string{"telegram:42"}, RunLink: func(r *Run) string {
		linked = append(linked, r.ID)
		return "https://bot.example.com/runs/" + r.ID + "?sig=s"
	}})
	h.bot.AddPlatform(h.plat)
	if err := h.bot.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.bot.Stop)
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
