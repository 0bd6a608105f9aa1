package todoisttest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Webhooks, as Todoist sends them to an app's callback URL
// (developer.todoist.com/api/v1/#tag/Webhooks; the request format is
// also described by the official TypeScript SDK's payload types,
// doist.github.io/todoist-sdk-typescript/api/type-aliases/TaskAddedPayload;
// the signature rule below is the docs page's "Request Format" alone:
// no SDK function for it was found to cite):
//   - one HTTP POST per event, Content-Type application/json, with the
//     body {"event_name": "item:added", "user_id": …, "event_data": the
//     task as the API returns it, "initiator": the collaborator who made
//     the change {"id", "email", "full_name", "image_id", "is_premium"},
//     "triggered_at": …, "version": "10"};
//   - X-Todoist-Hmac-SHA256: the base64 of the HMAC-SHA256 of the raw
//     body keyed with the app's client_secret;
//   - X-Todoist-Delivery-ID: unique per event, the same on a retry;
//   - the app answers 200; anything else is a failed delivery (Todoist
//     retries later; the fake does not).
//
// Webhooks reach an app only for the people who authorized it through
// OAuth (Service: an App with a WebhookURL); a single-account Server
// sends them once told where (SendWebhooks). Deliveries can be dropped
// (DropWebhooks), as late or lost ones are in life.
//
// The fake sends item:added, for a task added by AddTask (another
// client: the person's phone) or through the API.

// webhooks is where a Server sends its webhooks.
type webhooks struct {
	url    string
	secret []byte
	client *http.Client
	// drop is how many coming deliveries to drop; sent and dropped count.
	drop, sent, dropped int
	// queue holds the events not yet sent (made under the server's lock,
	// sent after it is released).
	queue []webhookEvent
	seq   int
}

type webhookEvent struct {
	EventName   string      `json:"event_name"`
	UserID      string      `json:"user_id"`
	EventData   syncItem    `json:"event_data"`
	Initiator   webhookUser `json:"initiator"`
	TriggeredAt string      `json:"triggered_at"`
	Version     string      `json:"version"`
	delivery    string
}

type webhookUser struct {
	ID        string  `json:"id"`
	Email     string  `json:"email"`
	FullName  string  `json:"full_name"`
	ImageID   *string `json:"image_id"`
	IsPremium bool    `json:"is_premium"`
}

// WebhookSignatureHeader carries the HMAC of a webhook's body.
const WebhookSignatureHeader = "X-Todoist-Hmac-SHA256"

// SendWebhooks makes the server POST its events to callbackURL, signed
// with clientSecret, through hc (nil: a client with a 10s timeout).
func (s *Server) SendWebhooks(callbackURL, clientSecret string, hc *http.Client) {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = &webhooks{url: callbackURL, secret: []byte(clientSecret), client: hc}
}

// DropWebhooks drops the next n deliveries (they are never sent).
func (s *Server) DropWebhooks(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooks != nil {
		s.hooks.drop += n
	}
}

// WebhooksSent reports the deliveries answered 200 and those dropped.
func (s *Server) WebhooksSent() (sent, dropped int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooks == nil {
		return 0, 0
	}
	return s.hooks.sent, s.hooks.dropped
}

// SignWebhook returns the X-Todoist-Hmac-SHA256 value of body.
func SignWebhook(body []byte, clientSecret string) string {
	m := hmac.New(sha256.New, []byte(clientSecret))
	m.Write(body)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// taskAdded queues item:added for t. s.mu is held.
func (s *Server) taskAdded(t *Task) {
	h := s.hooks
	if h == nil {
		return
	}
	h.seq++
	u := s.userJSON()
	h.queue = append(h.queue, webhookEvent{EventName: "item:added", UserID: s.st.userID, EventData: s.syncItem(t),
		Initiator:   webhookUser{ID: u.ID, Email: u.Email, FullName: u.FullName},
		TriggeredAt: ts(s.now()), Version: "10", delivery: fmt.Sprintf("%s-%d", s.st.userID, h.seq)})
}

// flushWebhooks sends the queued events, one POST each, in order. It is
// called without s.mu held: the receiver may call the API back.
func (s *Server) flushWebhooks() {
	for {
		s.mu.Lock()
		h := s.hooks
		if h == nil || len(h.queue) == 0 {
			s.mu.Unlock()
			return
		}
		ev := h.queue[0]
		h.queue = h.queue[1:]
		if h.drop > 0 {
			h.drop--
			h.dropped++
			s.mu.Unlock()
			continue
		}
		url, secret, client := h.url, string(h.secret), h.client
		s.mu.Unlock()
		body, _ := json.Marshal(ev)
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", "Todoist-Webhooks")
		req.Header.Set("X-Todoist-Delivery-ID", ev.delivery)
		req.Header.Set(WebhookSignatureHeader, SignWebhook(body, secret))
		resp, err := client.Do(req)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			s.mu.Lock()
			h.sent++
			s.mu.Unlock()
		}
	}
}

// UserID returns the account's Todoist user id (webhooks' user_id).
func (s *Server) UserID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.userID
}
