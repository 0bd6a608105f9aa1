package discord

import (
	"strconv"
	"testing"

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
