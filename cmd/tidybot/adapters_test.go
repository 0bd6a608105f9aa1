package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/config"
)

// hookAdapter is a platform as serve sees it (bot.Adapter and
// bot.Router): Run hands one message to the bot, a POST to /hook/in
// another; Send records what the bot posts.
type hookAdapter struct {
	mu    sync.Mutex // protects sent
	sent  []string
	ran   chan struct{}
	ended chan struct{}
}

func (a *hookAdapter) Name() string { return "hook" }

func (a *hookAdapter) Send(_ context.Context, m bot.Outgoing) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = append(a.sent, m.Text)
	return "", nil
}

func (a *hookAdapter) texts() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sent)
}

func (a *hookAdapter) Run(ctx context.Context, h bot.Handler) error {
	close(a.ran)
	if err := h.Handle(ctx, bot.Incoming{Platform: "hook", ChatID: "c1", UserID: "7", DM: true, Text: "from Run", EventID: "r1"}); err != nil {
		return err
	}
	<-ctx.Done()
	close(a.ended)
	return nil
}

func (a *hookAdapter) Routes(mux *http.ServeMux, h bot.Handler) error {
	mux.HandleFunc("POST /hook/in", func(w http.ResponseWriter, r *http.Request) {
		if err := h.Handle(r.Context(), bot.Incoming{Platform: "hook", ChatID: "c2", UserID: "7", DM: true, Text: "from Routes", EventID: "h1"}); err != nil {
			http.Error(w, "try again", http.StatusServiceUnavailable)
		}
	})
	return nil
}

var (
	_ bot.Adapter = (*hookAdapter)(nil)
	_ bot.Router  = (*hookAdapter)(nil)
)

// TestServeRunsEveryConfiguredAdapter: serve knows platforms only through
// the platforms table: a new row's allowlist rule checks its entries,
// its routes are served on TIDYBOT_HTTP_ADDR, and its Run hands events to
// the bot until serve stops.
func TestServeRunsEveryConfiguredAdapter(t *testing.T) {
	a := &hookAdapter{ran: make(chan struct{}), ended: make(chan struct{})}
	saved := platforms
	t.Cleanup(func() { platforms = saved })
	platforms = append(slices.Clone(saved), platform{Platform: config.Platform{Name: "hook",
		Allow: func(id string, _ bool) error {
			if id != "7" {
				return errFakeID
			}
			return nil
		},
		On: func(Config) bool { return true }},
		open: func(context.Context, *Main, Config, *slog.Logger, *bot.Bot) (bot.Adapter, error) {
			return a, nil
		}})
	e := newEnv(t)
	e.cfg.HTTPOnly = false // the hook platform is one
	e.cfg.AllowedUsers = []string{"hook:7"}
	r := startServe(t, e, nil)
	resp, err := http.Post(r.base+"/hook/in", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /hook/in: %d", resp.StatusCode)
	}
	waitFor(t, "both answers", func() bool {
		got := strings.Join(a.texts(), "|")
		return strings.Contains(got, "You said: from Run") && strings.Contains(got, "You said: from Routes")
	})
	r.stop()
	select {
	case <-a.ended:
	default:
		t.Error("serve stopped without ending the adapter's Run")
	}

	c := validConfig()
	c.AllowedUsers = []string{"hook:8"}
	if err := validate(c, false); err == nil || !strings.Contains(err.Error(), `"hook:8" `+errFakeID.Error()) {
		t.Errorf("the hook platform's rule was not asked: %v", err)
	}
}

var errFakeID = errors.New("is never hook")
