package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNotReadyGatesEveryRoute: while not ready, /healthz says why with a
// 503 and every other route answers 503 with Retry-After (a webhook's
// sender delivers again); Ready restores both.
func TestNotReadyGatesEveryRoute(t *testing.T) {
	s := New(Config{})
	s.Mux().HandleFunc("POST /telegram/webhook", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := s.gate(s.Mux())
	do := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	s.NotReady("could not reach Telegram at api.telegram.org (host not found)")
	if rec := do("GET", healthPath); rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not ready: could not reach Telegram") {
		t.Errorf("/healthz not ready: %d %q", rec.Code, rec.Body.String())
	}
	if rec := do("POST", "/telegram/webhook"); rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
		t.Errorf("webhook not ready: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	s.Ready()
	if rec := do("GET", healthPath); rec.Code != http.StatusOK || rec.Body.String() != "ok\n" {
		t.Errorf("/healthz ready: %d %q", rec.Code, rec.Body.String())
	}
	if rec := do("POST", "/telegram/webhook"); rec.Code != http.StatusNoContent {
		t.Errorf("webhook ready: %d", rec.Code)
	}
}
