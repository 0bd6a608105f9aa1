package directhttp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestClientServesTheHandler(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen", r.Method+" "+r.RequestURI+" "+string(body))
		w.WriteHeader(http.StatusTeapot)
	})
	c := Client(h)
	for _, tc := range []struct {
		name, method, body, want string
	}{
		{"get, no body", http.MethodGet, "", "GET /a?b=c "},
		{"post", http.MethodPost, "hi", "POST /a?b=c hi"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, _ := http.NewRequestWithContext(t.Context(), tc.method, "http://fake/a?b=c", body)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("X-Seen"); resp.StatusCode != http.StatusTeapot || got != tc.want {
				t.Errorf("got %d %q, want 418 %q", resp.StatusCode, got, tc.want)
			}
		})
	}
}

func TestEndedContextFails(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { cancel() })
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://fake/", nil)
	if _, err := Client(h).Do(req); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled for a context ended while served", err)
	}
	if _, err := Client(h).Do(req); !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled for a context ended before", err)
	}
}
