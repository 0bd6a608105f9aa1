package telegram

import (
	"context"
	"net/http"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// botAPI is the part of telegram-bot-api's *tgbotapi.BotAPI the adapter
// calls (STYLE.md; go-joe/slack-adapter's slackAPI): its logic depends
// on these methods only, and telegramtest covers the client itself.
type botAPI interface {
	Send(c tgbotapi.Chattable) (tgbotapi.Message, error)
	Request(c tgbotapi.Chattable) (*tgbotapi.APIResponse, error)
	MakeRequest(endpoint string, params tgbotapi.Params) (*tgbotapi.APIResponse, error)
	GetFile(config tgbotapi.FileConfig) (tgbotapi.File, error)
}

var _ botAPI = (*tgbotapi.BotAPI)(nil)

// pollerFor returns a copy of api whose requests end with ctx (the
// library's take no context), for long polling: a getUpdates that waits
// PollTimeout ends at shutdown.
func pollerFor(api *tgbotapi.BotAPI, cfg Config) func(ctx context.Context) botAPI {
	return func(ctx context.Context) botAPI {
		poller := *api
		poller.Client = ctxClient{hc: &http.Client{Timeout: cfg.PollTimeout + 30*time.Second, Transport: cfg.HTTPClient.Transport}, ctx: ctx}
		return &poller
	}
}
