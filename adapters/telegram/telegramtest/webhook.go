package telegramtest

import "net/http"

// webhookInfo answers getWebhookInfo (core.telegram.org/bots/api
// #getwebhookinfo): a WebhookInfo whose url is "" when no webhook is set
// (setWebhook sets it), with pending_update_count, the updates not yet
// delivered, and last_error_date and last_error_message once WebhookFails
// was called ("Error message in human-readable format for the most recent
// error that happened when trying to deliver an update via webhook").
func (s *Server) webhookInfo(w http.ResponseWriter) {
	s.mu.Lock()
	info := map[string]any{"url": s.webhook["url"], "has_custom_certificate": false, "pending_update_count": len(s.updates)}
	if s.webhookError != "" {
		info["last_error_date"] = 1764072000
		info["last_error_message"] = s.webhookError
	}
	s.mu.Unlock()
	reply(w, info)
}

// WebhookFails makes getWebhookInfo report msg as the last error
// Telegram met delivering an update to the webhook (for example "Wrong
// response from the webhook: 401 Unauthorized").
func (s *Server) WebhookFails(msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.webhookError = msg
}
