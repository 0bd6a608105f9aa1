package todoisttest

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// authorize has a signed-in person approve app and returns the code the
// redirect carries.
func authorize(t *testing.T, s *Service, a *Account, app App) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.AuthURL+"/oauth/authorize?"+url.Values{"client_id": {app.ClientID}, "scope": {"data:read_write"}, "state": {"s"}}.Encode(), nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: a.Session})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	back, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || back.Query().Get("code") == "" {
		t.Fatalf("authorize: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return back.Query().Get("code")
}

func TestAccessTokenTakesAFormOrJSON(t *testing.T) {
	s := NewService(t)
	app := App{ClientID: "cid", ClientSecret: "secret", RedirectURL: "https://bot.example/cb"}
	s.RegisterApp(app)
	a := s.NewAccount()
	for _, tt := range []struct {
		name, contentType string
		body              func(code string) string
	}{
		{"form", "application/x-www-form-urlencoded", func(code string) string {
			return url.Values{"client_id": {app.ClientID}, "client_secret": {app.ClientSecret}, "code": {code}}.Encode()
		}},
		// Doist's TypeScript SDK (getAuthToken) posts JSON.
		{"json", "application/json", func(code string) string {
			b, _ := json.Marshal(map[string]string{"client_id": app.ClientID, "client_secret": app.ClientSecret, "code": code})
			return string(b)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(s.AuthURL+"/oauth/access_token", tt.contentType, strings.NewReader(tt.body(authorize(t, s, a, app))))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				AccessToken string `json:"access_token"`
				Error       string `json:"error"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&out)
			if resp.StatusCode != http.StatusOK || out.AccessToken == "" {
				t.Fatalf("%d %+v, want a token", resp.StatusCode, out)
			}
		})
	}
}
