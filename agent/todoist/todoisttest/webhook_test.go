package todoisttest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

type hookCatcher struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (c *hookCatcher) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	c.reqs = append(c.reqs, r)
	c.body = append(c.body, b)
	c.mu.Unlock()
}

// TestWebhookItemAdded: a task added sends one signed item:added POST
// in Todoist's format; a dropped one is not sent.
func TestWebhookItemAdded(t *testing.T) {
	c := &hookCatcher{}
	rcv := httptest.NewServer(c)
	defer rcv.Close()
	s := New(t)
	s.SendWebhooks(rcv.URL+"/todoist/webhook", "shh", rcv.Client())
	task := s.AddTask(Task{Content: "Buy milk"})
	if len(c.reqs) != 1 {
		t.Fatalf("%d deliveries, want 1", len(c.reqs))
	}
	r, body := c.reqs[0], c.body[0]
	if r.Method != http.MethodPost || r.URL.Path != "/todoist/webhook" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s %q", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
	}
	if got, want := r.Header.Get("X-Todoist-Hmac-SHA256"), SignWebhook(body, "shh"); got != want || got == "" {
		t.Errorf("signature %q, want %q", got, want)
	}
	if r.Header.Get("X-Todoist-Delivery-ID") == "" {
		t.Error("no delivery id")
	}
	var ev struct {
		EventName string `json:"event_name"`
		UserID    string `json:"user_id"`
		EventData struct {
			ID, Content, ProjectID string
		} `json:"event_data"`
		Initiator map[string]any `json:"initiator"`
		Version   string         `json:"version"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.EventName != "item:added" || ev.UserID == "" || ev.EventData.ID != task.ID || ev.EventData.Content != "Buy milk" || ev.Initiator["id"] == nil || ev.Version == "" {
		t.Errorf("event %s", body)
	}
	if !strings.Contains(string(body), `"project_id":"`+s.InboxID()+`"`) {
		t.Errorf("event data lacks the project: %s", body)
	}

	s.DropWebhooks(1)
	s.AddTask(Task{Content: "Dropped"})
	s.AddTask(Task{Content: "Sent"})
	if sent, dropped := s.WebhooksSent(); sent != 2 || dropped != 1 || len(c.reqs) != 2 {
		t.Errorf("sent %d dropped %d (received %d), want 2, 1, 2", sent, dropped, len(c.reqs))
	}
}

// TestWebhookItemAddedThroughTheAPI: a task added with item_add sends
// its webhook too.
func TestWebhookItemAddedThroughTheAPI(t *testing.T) {
	c := &hookCatcher{}
	rcv := httptest.NewServer(c)
	defer rcv.Close()
	s := New(t)
	s.SendWebhooks(rcv.URL, "shh", rcv.Client())
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/sync", strings.NewReader(`{"commands":[{"type":"item_add","temp_id":"x","uuid":"u1","args":{"content":"From the API"}}]}`))
	req.Header.Set("Authorization", "Bearer "+s.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(c.reqs) != 1 || !strings.Contains(string(c.body[0]), "From the API") {
		t.Errorf("status %d, %d deliveries", resp.StatusCode, len(c.reqs))
	}
}
