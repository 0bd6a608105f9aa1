package bot

import (
	"context"
	"net/http"
)

// What a chat platform is to the core (compare go-joe/joe's Adapter:
// register, send, close). An adapter package (adapters/telegram,
// adapters/slack) turns the platform's events into Incoming and hands
// them to a Handler (Receiver, Router), and posts the bot's messages
// (Platform, with the optional abilities in platform.go found by type
// assertion). docs/adapters.md says how to add one.

// Handler takes the events of every platform; *Bot implements it.
type Handler interface {
	// Handle stores one event durably (or drops a duplicate, or refuses
	// a stranger) and returns quickly, without calling the model, so the
	// adapter can acknowledge the platform at once. An error means
	// nothing was stored: the platform should deliver the event again
	// (ErrStopped once the bot is shutting down).
	Handle(ctx context.Context, in Incoming) error
}

var _ Handler = (*Bot)(nil)

// Receiver is a platform's intake: what it runs for as long as the bot
// serves.
type Receiver interface {
	// Run registers with the platform (commands, webhook) and hands its
	// events to h until ctx ends, then returns nil. An adapter whose
	// events arrive only over HTTP (Router) waits for ctx. An error
	// means intake cannot go on (a bad token, another poller): serve
	// stops.
	Run(ctx context.Context, h Handler) error
}

// Router is a Receiver whose events (also) arrive as HTTP requests on
// tidybot serve's address (webhooks).
type Router interface {
	// Routes registers the adapter's handlers on mux ("POST
	// /slack/events"), each handing its events to h; none when the
	// configuration selects no HTTP intake. An error means the
	// configuration cannot serve them.
	Routes(mux *http.ServeMux, h Handler) error
}

// Adapter is a platform the bot both posts to and hears from.
type Adapter interface {
	Platform
	Receiver
}

// AllowRule checks the id of one TIDYBOT_ALLOWED_USERS entry of a
// platform ("123456" of "telegram:123456"); team says whether team mode
// is on (entries for many people, such as "telegram:*", need it). Each
// adapter package supplies its own (AllowedID). The error says what is
// wrong in words that follow the entry ("can never match: …").
type AllowRule func(id string, team bool) error
