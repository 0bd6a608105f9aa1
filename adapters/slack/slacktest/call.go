package slacktest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// Call posts a Web API method to the fake as @slack/web-api and
// slack-go do (form-encoded, the bot token as a Bearer header, arrays
// as JSON text) and returns the decoded answer, for tests that speak
// the wire protocol without a client.
func (s *Server) Call(t testing.TB, method string, form url.Values) map[string]any {
	t.Helper()
	resp := s.Send(t, method, form)
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out
}

// Send posts method as Call does and returns the response undecoded,
// for tests that read its status and headers (a 429's Retry-After); the
// caller closes its body.
func (s *Server) Send(t testing.TB, method string, form url.Values) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL+method, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}
