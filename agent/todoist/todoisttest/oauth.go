package todoisttest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Service is a fake Todoist with many accounts and OAuth: an app
// registered in the App Management Console, people who authorize it, and
// one API v1 where each access token sees only its own account.
//
// The OAuth rules follow the official SDKs' authentication modules
// (Doist/todoist-api-python todoist_api_python/authentication.py,
// Doist/todoist-api-typescript src/authentication.ts) and Todoist's
// authorization guide (developer.todoist.com/guides/#authorization,
// todoist.com/api/v1/docs#tag/Authorization):
//   - GET /oauth/authorize?client_id=…&scope=…&state=… (scopes joined by
//     commas, at least one) redirects the signed-in person to the app's
//     registered OAuth redirect URL with code and state, or with
//     error=invalid_scope / access_denied and state;
//   - POST /oauth/access_token with the fields client_id, client_secret
//     and code (a form, or JSON as the TypeScript SDK sends) answers {"access_token": …, "token_type":
//     "Bearer"}; a wrong code is 400 {"error": "bad_authorization_code"},
//     wrong app credentials 400 {"error": "incorrect_application_credentials"};
//     a code works once;
//   - a token may do what its scopes grant (scope.go);
//   - POST /api/v1/revoke revokes a token as RFC 7009 has it: the app's
//     client_id and client_secret in HTTP Basic authentication, the body
//     {"token": …, "token_type_hint": "access_token"} (JSON, as the
//     TypeScript SDK's revokeToken sends it; a form, as RFC 7009 §2.1
//     does, is read too); 200 whether or not the token was known (RFC
//     7009 §2.2), 401 invalid_client for wrong credentials (RFC 6749
//     §5.2). WithoutRevoke turns it off, as on a Todoist older than it;
//   - the legacy DELETE /api/v1/access_tokens with client_id,
//     client_secret and access_token (operation
//     revoke_access_token_api_api_v1_access_tokens_delete; the
//     TypeScript SDK's revokeAuthToken, removed in its PR #482 of
//     2026-03-11 in favour of revokeToken) revokes the token too; the
//     older SDKs POST the same fields to access_tokens/revoke, also
//     accepted.
type Service struct {
	// URL is the API base URL (TODOIST_API_URL); AuthURL the OAuth base
	// (TODOIST_AUTH_URL).
	URL, AuthURL string

	srv *httptest.Server
	tb  testing.TB

	mu       sync.Mutex // protects the fields below
	apps     map[string]App
	accounts map[string]*Account // by session
	codes    map[string]grant    // authorization codes not yet exchanged
	tokens   map[string]*Account // access tokens in force
	revokes  map[string]int      // revocation requests by "METHOD path"
	noRevoke bool                // POST /api/v1/revoke is not served
	scopes   map[string]string   // the scopes granted to each token, joined by commas
	denied   map[string]bool     // sessions that press "Cancel"
}

// App is an OAuth app registered in the App Management Console.
type App struct {
	ClientID, ClientSecret string
	// RedirectURL is the "OAuth redirect URL" of the app's settings.
	RedirectURL string
	// WebhookURL, when set, is the app's "Webhook callback URL": the
	// accounts that authorize the app send it their webhooks (webhook.go).
	WebhookURL string
}

// Account is one person's Todoist: its own fake server (projects, tasks).
type Account struct {
	*Server
	// Session is the browser session of the person signed in to it.
	Session string
	svc     *Service
}

type grant struct {
	clientID string
	acct     *Account
	scope    string
}

// ValidScopes are the OAuth scopes Todoist knows (the TypeScript SDK's
// Permission type).
var ValidScopes = []string{"task:add", "data:read", "data:read_write", "data:delete", "project:delete", "backups:read"}

// NewService starts a fake Todoist with no account. If tb is not nil,
// the server (and every account's) closes when the test ends; otherwise
// (a command: cmd/fakeservers) call Close, and close each account.
func NewService(tb testing.TB) *Service {
	s := &Service{tb: tb, apps: map[string]App{}, accounts: map[string]*Account{}, codes: map[string]grant{}, tokens: map[string]*Account{}, scopes: map[string]string{}, revokes: map[string]int{}, denied: map[string]bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /oauth/authorize", s.authorize)
	mux.HandleFunc("POST /oauth/access_token", s.accessToken)
	mux.HandleFunc("POST /api/v1/revoke", s.revokeRFC7009)
	mux.HandleFunc("DELETE /api/v1/access_tokens", s.revoke)
	mux.HandleFunc("POST /api/v1/access_tokens/revoke", s.revoke)
	mux.HandleFunc("/api/v1/", s.api)
	s.srv = httptest.NewServer(mux)
	s.URL, s.AuthURL = s.srv.URL+apiPrefix, s.srv.URL
	if tb != nil {
		tb.Cleanup(s.srv.Close)
	}
	return s
}

// Close shuts the service's server down (NewService with a nil tb).
func (s *Service) Close() { s.srv.Close() }

// RegisterApp registers an OAuth app.
func (s *Service) RegisterApp(a App) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apps[a.ClientID] = a
}

// NewAccount creates a person's account (just the Inbox, opts as for New).
func (s *Service) NewAccount(opts ...Option) *Account {
	a := &Account{Server: New(s.tb, append([]Option{WithToken("internal-" + randHex(16))}, opts...)...), Session: randHex(16), svc: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accounts[a.Session] = a
	return a
}

// Browser returns an HTTP client signed in to a's account at Todoist (its
// session cookie) that follows redirects, as a person's browser does.
func (a *Account) Browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	u, _ := url.Parse(a.svc.AuthURL)
	jar.SetCookies(u, []*http.Cookie{{Name: SessionCookie, Value: a.Session, Path: "/"}})
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// Deny makes a's next authorization a press of "Cancel".
func (a *Account) Deny() {
	a.svc.mu.Lock()
	defer a.svc.mu.Unlock()
	a.svc.denied[a.Session] = true
}

// Tokens returns the access tokens in force for a.
func (a *Account) Tokens() []string {
	a.svc.mu.Lock()
	defer a.svc.mu.Unlock()
	var out []string
	for t, acct := range a.svc.tokens {
		if acct == a {
			out = append(out, t)
		}
	}
	return out
}

// Grant returns a new access token to a's account with the given
// scopes, as if a had authorized an app asking for them.
func (a *Account) Grant(scopes ...string) string {
	a.svc.mu.Lock()
	defer a.svc.mu.Unlock()
	tok := randHex(20)
	a.svc.tokens[tok] = a
	a.svc.scopes[tok] = strings.Join(scopes, ",")
	return tok
}

// RevokeAll revokes every token of a, as removing the app under
// Settings → Integrations does.
func (a *Account) RevokeAll() {
	a.svc.mu.Lock()
	defer a.svc.mu.Unlock()
	for t, acct := range a.svc.tokens {
		if acct == a {
			delete(a.svc.tokens, t)
		}
	}
}

// SessionCookie is the name of the cookie of a person signed in to the
// fake (Account.Session is its value), for a browser other than Browser.
const SessionCookie = "todoisttest_session"

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Service) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	app, ok := s.apps[q.Get("client_id")]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "Invalid client_id", http.StatusBadRequest)
		return
	}
	back, err := url.Parse(app.RedirectURL)
	if err != nil {
		http.Error(w, "Invalid redirect URL", http.StatusBadRequest)
		return
	}
	v := url.Values{}
	if st := q.Get("state"); st != "" {
		v.Set("state", st)
	}
	scope := q.Get("scope")
	for _, sc := range strings.Split(scope, ",") {
		if !contains(ValidScopes, sc) {
			v.Set("error", "invalid_scope")
			back.RawQuery = v.Encode()
			http.Redirect(w, r, back.String(), http.StatusFound)
			return
		}
	}
	c, err := r.Cookie(SessionCookie)
	s.mu.Lock()
	var acct *Account
	if err == nil {
		acct = s.accounts[c.Value]
	}
	denied := acct != nil && s.denied[acct.Session]
	if denied {
		delete(s.denied, acct.Session)
	}
	s.mu.Unlock()
	if acct == nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<h1>Log in to Todoist</h1>"))
		return
	}
	if denied {
		v.Set("error", "access_denied")
	} else {
		code := randHex(20)
		s.mu.Lock()
		s.codes[code] = grant{clientID: app.ClientID, acct: acct, scope: scope}
		s.mu.Unlock()
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

type oauthError struct {
	Error string `json:"error"`
}

// accessToken serves POST /oauth/access_token. The fields come as a form
// (the guide's curl example, the Python SDK) or as a JSON object (the
// TypeScript SDK's getAuthToken posts {"client_id","client_secret","code"}
// as JSON: Doist/todoist-sdk-typescript src/authentication.ts
// requestAuthToken, through its http-client's JSON payload).
func (s *Service) accessToken(w http.ResponseWriter, r *http.Request) {
	var f struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Code         string `json:"code"`
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "application/json" {
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&f); err != nil {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
			return
		}
	} else {
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
			return
		}
		f.ClientID, f.ClientSecret, f.Code = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret"), r.PostForm.Get("code")
	}
	id, secret, code := f.ClientID, f.ClientSecret, f.Code
	s.mu.Lock()
	defer s.mu.Unlock()
	app, ok := s.apps[id]
	if !ok || app.ClientSecret != secret {
		writeJSON(w, http.StatusBadRequest, oauthError{"incorrect_application_credentials"})
		return
	}
	g, ok := s.codes[code]
	if !ok || g.clientID != id {
		writeJSON(w, http.StatusBadRequest, oauthError{"bad_authorization_code"})
		return
	}
	delete(s.codes, code)
	tok := randHex(20)
	s.tokens[tok] = g.acct
	s.scopes[tok] = g.scope
	if app.WebhookURL != "" {
		// Webhooks start once a person authorizes the app.
		g.acct.SendWebhooks(app.WebhookURL, app.ClientSecret, nil)
	}
	writeJSON(w, http.StatusOK, map[string]string{"access_token": tok, "token_type": "Bearer"})
}

// WithoutRevoke makes POST /api/v1/revoke answer 404, as a Todoist
// with only the legacy endpoint would.
func (s *Service) WithoutRevoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noRevoke = true
}

// RevokeRequests returns how many revocation requests came to each
// endpoint, by "METHOD path" ("POST /api/v1/revoke").
func (s *Service) RevokeRequests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.revokes)
}

func (s *Service) revokeRFC7009(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.revokes[r.Method+" "+r.URL.Path]++
	off := s.noRevoke
	s.mu.Unlock()
	if off {
		writeJSON(w, http.StatusNotFound, &apiError{Error: "Not found", ErrorCode: 478, ErrorTag: "NOT_FOUND", HTTPCode: 404, ErrorExtra: map[string]any{}})
		return
	}
	id, secret, ok := r.BasicAuth()
	s.mu.Lock()
	app, known := s.apps[id]
	s.mu.Unlock()
	if !ok || !known || app.ClientSecret != secret {
		w.Header().Set("WWW-Authenticate", `Basic realm="todoist"`)
		writeJSON(w, http.StatusUnauthorized, oauthError{"invalid_client"})
		return
	}
	var body struct {
		Token         string `json:"token"`
		TokenTypeHint string `json:"token_type_hint"`
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
			return
		}
	default:
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
			return
		}
		body.Token, body.TokenTypeHint = r.PostForm.Get("token"), r.PostForm.Get("token_type_hint")
	}
	if body.Token == "" {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
		return
	}
	s.mu.Lock()
	delete(s.tokens, body.Token)
	delete(s.scopes, body.Token)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *Service) revoke(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.revokes[r.Method+" "+r.URL.Path]++
	s.mu.Unlock()
	if err := r.ParseForm(); err != nil { // query and, for POST, the form
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
		return
	}
	id, secret, tok := r.Form.Get("client_id"), r.Form.Get("client_secret"), r.Form.Get("access_token")
	s.mu.Lock()
	defer s.mu.Unlock()
	if app, ok := s.apps[id]; !ok || app.ClientSecret != secret {
		writeJSON(w, http.StatusUnauthorized, oauthError{"incorrect_application_credentials"})
		return
	}
	if tok == "" {
		writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request"})
		return
	}
	delete(s.tokens, tok)
	w.WriteHeader(http.StatusNoContent)
}

// api serves the API v1 of the account the bearer token belongs to,
// within the scopes granted to the token (scope.go).
func (s *Service) api(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	s.mu.Lock()
	acct, scope := s.tokens[tok], s.scopes[tok]
	s.mu.Unlock()
	if acct == nil || tok == "" {
		writeJSON(w, http.StatusUnauthorized, &apiError{Error: "Invalid token", ErrorCode: 401, ErrorTag: "AUTH_INVALID_TOKEN", HTTPCode: 401, ErrorExtra: map[string]any{}})
		return
	}
	r = r.Clone(withScopes(r.Context(), parseScopes(scope)))
	r.Header.Set("Authorization", "Bearer "+acct.Token)
	acct.ServeHTTP(w, r)
}
