package telegram

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// Checked is what Telegram says about the configured bot (tidybot check).
type Checked struct {
	// UserName is the bot's @username (getMe).
	UserName string
	// PrivacyOff is getMe's can_read_all_group_messages: privacy mode
	// is off, the bot receives every group message.
	PrivacyOff bool
	// Webhook is getWebhookInfo's url ("" in long-polling mode), Pending
	// its pending_update_count and LastError its last_error_message.
	Webhook   string
	Pending   int
	LastError string
}

// Check asks Telegram about cfg's bot without starting the adapter or
// changing its webhook: getMe, then getWebhookInfo
// (core.telegram.org/bots/api#getwebhookinfo). Errors are redacted of
// the token.
func Check(cfg Config) (Checked, error) {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	endpoint := strings.TrimRight(cfg.APIURL, "/") + "/bot%s/%s"
	api, err := tgbotapi.NewBotAPIWithClient(cfg.Token, endpoint, cfg.HTTPClient)
	if err != nil {
		return Checked{}, fmt.Errorf("telegram: getMe: %w", redact(err, cfg.Token))
	}
	c := Checked{UserName: api.Self.UserName, PrivacyOff: api.Self.CanReadAllGroupMessages}
	info, err := api.GetWebhookInfo()
	if err != nil {
		return c, fmt.Errorf("telegram: getWebhookInfo: %w", redact(err, cfg.Token))
	}
	c.Webhook, c.Pending, c.LastError = info.URL, info.PendingUpdateCount, info.LastErrorMessage
	return c, nil
}
