package accounts

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

type addedRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (a *addedRecorder) added(_ context.Context, user, task string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, user+"/"+task)
	return nil
}

// TestWebhookFromTheFakeTodoist: the fake Todoist's signed item:added
// reaches the bot with the Todoist user and task ids; one signed with
// another secret gets 401 and reaches nothing.
func TestWebhookFromTheFakeTodoist(t *testing.T) {
	rec := &addedRecorder{}
	mux := http.NewServeMux()
	mux.Handle("POST "+WebhookPath, NewWebhook("app-secret", rec.added, nil))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	todo := todoisttest.New(t)
	todo.SendWebhooks(srv.URL+WebhookPath, "app-secret", srv.Client())
	task := todo.AddTask(todoisttest.Task{Content: "Buy milk"})
	if sent, _ := todo.WebhooksSent(); sent != 1 || len(rec.calls) != 1 || !strings.HasSuffix(rec.calls[0], "/"+task.ID) || strings.HasPrefix(rec.calls[0], "/") {
		t.Fatalf("sent %d, calls %v", sent, rec.calls)
	}

	other := todoisttest.New(t)
	other.SendWebhooks(srv.URL+WebhookPath, "another-app", srv.Client())
	other.AddTask(todoisttest.Task{Content: "Forged"})
	if sent, _ := other.WebhooksSent(); sent != 0 || len(rec.calls) != 1 {
		t.Errorf("a webhook signed with another secret was accepted (sent %d, calls %v)", sent, rec.calls)
	}
}

// TestWebhookRefusesBadRequests: each bad request gets its answer and
// reaches nothing.
func TestWebhookRefusesBadRequests(t *testing.T) {
	rec := &addedRecorder{}
	h := NewWebhook("app-secret", rec.added, nil)
	for _, tc := range []struct {
		name, method, body, sig string
		want                    int
	}{
		{"no signature", http.MethodPost, `{"event_name":"item:added","user_id":"1","event_data":{"id":"t"}}`, "", http.StatusUnauthorized},
		{"garbage signature", http.MethodPost, `{"event_name":"item:added","user_id":"1","event_data":{"id":"t"}}`, "!!!", http.StatusUnauthorized},
		{"signed garbage", http.MethodPost, `not json`, todoisttest.SignWebhook([]byte(`not json`), "app-secret"), http.StatusBadRequest},
		{"signed, no event", http.MethodPost, `{}`, todoisttest.SignWebhook([]byte(`{}`), "app-secret"), http.StatusBadRequest},
		{"another event", http.MethodPost, `{"event_name":"item:completed","user_id":"1","event_data":{"id":"t"}}`,
			todoisttest.SignWebhook([]byte(`{"event_name":"item:completed","user_id":"1","event_data":{"id":"t"}}`), "app-secret"), http.StatusOK},
		{"GET", http.MethodGet, "", "", http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, WebhookPath, strings.NewReader(tc.body))
			if tc.sig != "" {
				r.Header.Set("X-Todoist-Hmac-SHA256", tc.sig)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Errorf("status %d, want %d", w.Code, tc.want)
			}
		})
	}
	if len(rec.calls) != 0 {
		t.Errorf("calls %v, want none", rec.calls)
	}
}
