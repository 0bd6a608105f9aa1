package slacktest

import (
	"net/http"
	"strings"
)

// Grant sets the bot token's scopes, which auth.test's answer lists in
// its X-OAuth-Scopes header, comma-separated, as every Web API answer
// does (slack-go v0.35 slack.go: OptionOnResponseHeaders, "accessing
// headers like X-OAuth-Scopes"; response_headers_test.go). A Server
// granted nothing sends no such header.
func (s *Server) Grant(scopes ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.scopes = append([]string(nil), scopes...)
}

// scopesHeader sets X-OAuth-Scopes on an answer when scopes were granted.
func (s *Server) scopesHeader(w http.ResponseWriter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scopes != nil {
		w.Header().Set("X-OAuth-Scopes", strings.Join(s.scopes, ","))
	}
}
