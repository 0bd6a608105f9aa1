package todoist

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// DefaultAuthURL is where Todoist's OAuth endpoints live.
const DefaultAuthURL = "https://todoist.com"

// readScope is the scope the reads need.
const readScope = scopeWrite

// Scopes are what tidybot's reads, actions and undo need, asked for when
// a person connects: data:read_write, data:delete and project:delete.
var Scopes = func() []string {
	set := map[string]bool{readScope: true}
	for _, k := range kinds {
		set[k.scope] = true
	}
	return slices.Sorted(maps.Keys(set))
}()

// scopeAction words what a kind of write does, for scopeMessage.
func scopeAction(k agent.WriteKind) string {
	if a := kinds[k].action; a != "" {
		return a
	}
	return "change your Todoist"
}

// scopeMessage is what a person is told when Todoist refuses what
// needs scope for want of it.
func scopeMessage(what, scope string) string {
	return fmt.Sprintf("Todoist did not let me %s: this Todoist connection lacks the %s permission. Reconnect Todoist (/connect; on Slack /tidy connect) to grant it", what, scope)
}

// OAuth is a Todoist app's side of the OAuth 2 authorization-code flow,
// as the official SDKs do it (Doist/todoist-api-python
// todoist_api_python/authentication.py; Doist/todoist-api-typescript
// src/authentication.ts).
type OAuth struct {
	ClientID, ClientSecret string
	// AuthURL is the OAuth base (DefaultAuthURL); APIURL the API v1 base,
	// where tokens are revoked.
	AuthURL, APIURL string
	HTTP            *http.Client
}

// ErrBadCode is returned by Exchange when Todoist refuses the code
// (expired, used, or not issued to this app).
var ErrBadCode = errors.New("todoist: the authorization code was refused")

// AuthorizeURL is the page that asks the person to let the app at their
// account: client_id, the scopes joined by commas, and state
// (get_authentication_url in the Python SDK).
func (o *OAuth) AuthorizeURL(scopes []string, state string) string {
	q := url.Values{"client_id": {o.ClientID}, "scope": {strings.Join(scopes, ",")}, "state": {state}}
	return strings.TrimRight(o.base(), "/") + "/oauth/authorize?" + q.Encode()
}

func (o *OAuth) base() string {
	if o.AuthURL == "" {
		return DefaultAuthURL
	}
	return o.AuthURL
}

func (o *OAuth) client() *http.Client {
	if o.HTTP == nil {
		return &http.Client{Timeout: 30 * time.Second}
	}
	return o.HTTP
}

// Exchange trades an authorization code for an access token: a form POST
// of client_id, client_secret and code to /oauth/access_token, answered
// with access_token and token_type (get_auth_token in the Python SDK).
// The error never holds the secret, the code or the token.
func (o *OAuth) Exchange(ctx context.Context, code string) (string, error) {
	form := url.Values{"client_id": {o.ClientID}, "client_secret": {o.ClientSecret}, "code": {code}}
	u := strings.TrimRight(o.base(), "/") + "/oauth/access_token"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return "", fmt.Errorf("todoist: exchange code: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := o.client().Do(req)
	if err != nil {
		return "", fmt.Errorf("todoist: exchange code: %w", scrub(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var out struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	_ = json.Unmarshal(body, &out)
	switch {
	case resp.StatusCode == http.StatusOK && out.AccessToken != "":
		return out.AccessToken, nil
	case out.Error == "bad_authorization_code":
		return "", ErrBadCode
	case out.Error != "":
		return "", fmt.Errorf("todoist: exchange code: HTTP %d %s", resp.StatusCode, out.Error)
	}
	return "", fmt.Errorf("todoist: exchange code: HTTP %d without a token", resp.StatusCode)
}

// Revoke makes token invalid at Todoist: POST /revoke under the API, the
// RFC 7009 revocation the TypeScript SDK's revokeToken makes (the app's
// client_id and client_secret in HTTP Basic authentication, the body
// {"token": …, "token_type_hint": "access_token"}). Where that answers
// 404 (a Todoist without it), the legacy DELETE /access_tokens with
// client_id, client_secret and access_token, which the SDK dropped in its
// PR #482 (2026-03-11). A token Todoist no longer knows is revoked
// already (RFC 7009 §2.2: 200 for an invalid token).
func (o *OAuth) Revoke(ctx context.Context, token string) error {
	api := strings.TrimRight(o.APIURL, "/")
	if api == "" {
		api = DefaultBaseURL
	}
	body, _ := json.Marshal(map[string]string{"token": token, "token_type_hint": "access_token"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api+"/revoke", bytes.NewReader(body))
	if err != nil {
		return errors.New("todoist: revoke token: bad request")
	}
	req.SetBasicAuth(o.ClientID, o.ClientSecret)
	req.Header.Set("Content-Type", "application/json")
	status, err := o.do(req)
	if err != nil || status != http.StatusNotFound {
		return err
	}
	q := url.Values{"client_id": {o.ClientID}, "client_secret": {o.ClientSecret}, "access_token": {token}}
	req, err = http.NewRequestWithContext(ctx, http.MethodDelete, api+"/access_tokens?"+q.Encode(), nil)
	if err != nil {
		return errors.New("todoist: revoke token: bad request")
	}
	status, err = o.do(req)
	if err == nil && status == http.StatusNotFound {
		return fmt.Errorf("todoist: revoke token: no revocation endpoint at %s (HTTP 404 for /revoke and /access_tokens)", api)
	}
	return err
}

// do sends a revocation request; a 404 is returned as its status, for
// the caller to try the legacy endpoint, and any other answer but a 2xx
// is an error. Neither holds the secret or the token.
func (o *OAuth) do(req *http.Request) (int, error) {
	resp, err := o.client().Do(req)
	if err != nil {
		return 0, fmt.Errorf("todoist: revoke token: %w", scrub(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return resp.StatusCode, nil
	case resp.StatusCode/100 != 2:
		return resp.StatusCode, fmt.Errorf("todoist: revoke token: %s %s: HTTP %d", req.Method, req.URL.Path, resp.StatusCode)
	}
	return resp.StatusCode, nil
}

// scrub drops the URL (which may hold the secret and the token in its
// query) from a transport error.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}
