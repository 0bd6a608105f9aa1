package discord

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/hooks"
)

type countHandler struct{ n atomic.Int32 }

func (h *countHandler) Handle(context.Context, bot.Incoming) error { h.n.Add(1); return nil }

// A command or press whose data is missing can never come off the wire:
// discordgo's Interaction.UnmarshalJSON (interactions.go) decodes "data"
// for types 2 and 3 and fails when it is absent or not an object, so
// such an event is undecodable and skipped before the adapter reads it
// (which is why TestDiscordUndecodableGatewayEvents passes without the
// check in interactionIncoming). This pins that; the test below keeps
// the check itself.
func TestInteractionWithoutDataDoesNotDecode(t *testing.T) {
	for _, raw := range []string{
		`{"id":"1","type":2,"channel_id":"2","user":{"id":"3"}}`,
		`{"id":"1","type":3,"channel_id":"2","user":{"id":"3"}}`,
		`{"id":"1","type":2,"channel_id":"2","user":{"id":"3"},"data":"x"}`,
		`{"id":"1","type":3,"channel_id":"2","user":{"id":"3"},"data":[1]}`,
	} {
		var i discordgo.Interaction
		if err := json.Unmarshal([]byte(raw), &i); err == nil {
			t.Errorf("%s decoded (Data %#v): an interaction without its data would reach the adapter", raw, i.Data)
		}
	}
}

// An interaction that reaches the adapter without its data (built by
// hand, or decoded by a future discordgo that no longer fails on it) is
// answered "I cannot do anything with that here." and never handed to
// the bot, where ApplicationCommandData and MessageComponentData would
// panic on the nil Data.
func TestInteractionWithoutDataIsRefusedNotAPanic(t *testing.T) {
	for _, kind := range []discordgo.InteractionType{discordgo.InteractionApplicationCommand, discordgo.InteractionMessageComponent} {
		a := &Adapter{cfg: Config{Now: time.Now}, log: slog.New(slog.DiscardHandler), self: "10",
			threads: map[string]string{}, plain: map[string]bool{}, names: map[string]string{}, wrote: map[string]string{}, dms: map[string]string{},
			tokens: map[string]hookToken{}, inflight: map[string][]*interactionHook{}, seen: map[string]time.Time{}, hooks: &hooks.Memory{}}
		h := &countHandler{}
		in := &intake{a: a, h: h, ctx: context.Background()}
		var got *discordgo.InteractionResponse
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("type %d without data: panic %v", kind, r)
				}
			}()
			in.interaction(&discordgo.Interaction{ID: "5", Type: kind, ChannelID: "20", Token: "tok", User: &discordgo.User{ID: "30"}},
				func(r *discordgo.InteractionResponse) error { got = r; return nil })
		}()
		if h.n.Load() != 0 {
			t.Errorf("type %d without data was handed to the bot", kind)
		}
		if got == nil || got.Data == nil || got.Data.Content != bot.UnusableText || got.Data.Flags != discordgo.MessageFlagsEphemeral {
			t.Errorf("type %d without data answered %+v", kind, got)
		}
	}
}
