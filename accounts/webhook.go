package accounts

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// WebhookPath is where Todoist posts the app's webhooks: register
// TIDYBOT_PUBLIC_URL + WebhookPath as the "Webhook callback URL" of the
// app in Todoist's App Management Console, with the item:added event.
const WebhookPath = "/todoist/webhook"

// maxWebhookBody bounds a webhook's body: one event with one task.
const maxWebhookBody = 1 << 20

// ItemAdded hears that a task (taskID) was added in the Todoist account
// of Todoist user todoistUserID (the bot's AutopilotWebhook).
type ItemAdded func(ctx context.Context, todoistUserID, taskID string) error

// Webhook receives Todoist's webhooks (developer.todoist.com/api/v1/#tag/Webhooks):
// a POST with a JSON body {"event_name", "user_id", "event_data",
// "initiator", "version", …}, signed in X-Todoist-Hmac-SHA256 with the
// base64 of the HMAC-SHA256 of the raw body keyed with the app's client
// secret (as the official TypeScript SDK's verifyWebhookSignature
// checks it). A request without a valid signature gets 401 and touches
// nothing; a malformed body 400; any other event 200, ignored. An
// item:added is handed to the bot, which looks at the person's inbox
// (one small /sync, no model call) before the 200.
type Webhook struct {
	secret []byte
	added  ItemAdded
	log    *slog.Logger
}

// NewWebhook returns the receiver of Todoist's webhooks for the app with
// clientSecret.
func NewWebhook(clientSecret string, added ItemAdded, log *slog.Logger) *Webhook {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Webhook{secret: []byte(clientSecret), added: added, log: log}
}

// webhookEvent is the part of a webhook's body the bot reads.
type webhookEvent struct {
	EventName string `json:"event_name"`
	UserID    string `json:"user_id"`
	EventData struct {
		ID string `json:"id"`
	} `json:"event_data"`
}

// ServeHTTP implements http.Handler.
func (h *Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		http.Error(w, "body too large or unreadable", http.StatusBadRequest)
		return
	}
	if !h.signed(body, r.Header.Get("X-Todoist-Hmac-SHA256")) {
		h.log.Warn("todoist webhook refused: bad signature")
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	var ev webhookEvent
	if err := json.Unmarshal(body, &ev); err != nil || ev.EventName == "" {
		http.Error(w, "malformed event", http.StatusBadRequest)
		return
	}
	if ev.EventName != "item:added" || h.added == nil {
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 20*time.Second)
	defer cancel()
	if err := h.added(ctx, ev.UserID, ev.EventData.ID); err != nil {
		// Acknowledged all the same: the periodic look files the task.
		h.log.Warn("todoist webhook: autopilot look failed", slog.String("todoist_user_id", ev.UserID), slog.Any("err", err))
	}
	w.WriteHeader(http.StatusOK)
}

// signed reports whether sig is the base64 HMAC-SHA256 of body.
func (h *Webhook) signed(body []byte, sig string) bool {
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil || len(got) == 0 || len(h.secret) == 0 {
		return false
	}
	m := hmac.New(sha256.New, h.secret)
	m.Write(body)
	return hmac.Equal(got, m.Sum(nil))
}

// OnItemAdded sets what hears Todoist's item:added webhooks (the bot's
// AutopilotWebhook); Routes serves them at WebhookPath, checked against
// the app's client secret.
func (t *Team) OnItemAdded(f ItemAdded) { t.itemAdded = f }
