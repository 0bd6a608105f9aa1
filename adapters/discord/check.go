package discord

import (
	"context"
	"fmt"

	"github.com/bwmarrin/discordgo"
)

// Checked is what Discord says about the configured bot (tidybot check).
type Checked struct {
	// UserName and ID are the bot user's (GET /users/@me).
	UserName, ID string
	// Gateway is the gateway's address (GET /gateway/bot), which the bot
	// reaches over a WebSocket.
	Gateway string
}

// Check asks Discord about cfg's bot without opening the gateway: GET
// /users/@me, then GET /gateway/bot. A refused token names
// DISCORD_BOT_TOKEN; errors are redacted of tokens.
func Check(ctx context.Context, cfg Config) (Checked, error) {
	s, err := newSession(&cfg)
	if err != nil {
		return Checked{}, err
	}
	me, err := s.User("@me", discordgo.WithContext(ctx))
	if err != nil {
		return Checked{}, connectError(err, cfg)
	}
	c := Checked{UserName: me.Username, ID: me.ID}
	g, err := s.GatewayBot(discordgo.WithContext(ctx))
	if err != nil {
		return c, fmt.Errorf("discord: GET /gateway/bot: %w", redact(err, cfg.Token))
	}
	c.Gateway = g.URL
	return c, nil
}
