package discord

import (
	"strconv"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
)

// What the adapter learns of channels stays bounded however many it
// sees: a bot in busy servers learns a thread, a plain channel or a DM
// per conversation, for as long as it runs.
func TestLearntChannelsStayBounded(t *testing.T) {
	a := bareAdapter(nil)
	for i := range 5000 {
		id := strconv.Itoa(i)
		a.learnThread("t"+id, "c")
		a.learnDM("d"+id, "u"+id)
		a.learnChannel(&wireChannel{ID: "p" + id, Type: new(discordgo.ChannelTypeGuildText)})
	}
	for name, n := range map[string]int{"threads": len(a.threads), "dms": len(a.dms), "plain": len(a.plain)} {
		if n > 1001 {
			t.Errorf("%s holds %d entries, want at most 1001", name, n)
		}
	}
}

// A message answering an interaction is edited through its token for
// the token's 15 minutes by the adapter's clock (Config.Now), the clock
// that set its expiry; after that, through its channel.
func TestTokenLifetimeByConfiguredClock(t *testing.T) {
	now := time.Now()
	a := bareAdapter(nil)
	a.cfg.Now = func() time.Time { return now }
	a.keepToken("m1", interactionHook{appID: "app", token: "tok", expires: now.Add(hookFor)})
	if _, ok := a.tokenOf("m1"); !ok {
		t.Fatal("a fresh token is not found")
	}
	if !a.firstTime("i1") || a.firstTime("i1") {
		t.Fatal("an interaction is not remembered as seen")
	}
	now = now.Add(hookFor + time.Minute)
	if _, ok := a.tokenOf("m1"); ok {
		t.Error("a token past its 15 minutes by Config.Now still edits")
	}
	if !a.firstTime("i1") {
		t.Error("an interaction seen more than 15 minutes ago by Config.Now is still remembered")
	}
}
