package todoist_test

import (
	"errors"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/agent/todoist/todoisttest"
)

// authorize runs the browser part of the flow for acct and returns the
// redirect the fake sends back.
func authorize(t *testing.T, o *todoist.OAuth, acct *todoisttest.Account, scopes []string, state string) url.Values {
	t.Helper()
	b := acct.Browser()
	b.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := b.Get(o.AuthorizeURL(scopes, state))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		t.Fatalf("authorize: HTTP %d, want 302", resp.StatusCode)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), "https://bot.example.com/oauth/todoist/callback?") {
		t.Fatalf("redirect to %q, want the app's redirect URL", resp.Header.Get("Location"))
	}
	return loc.Query()
}

func TestOAuthConnectEachAccountSeesOnlyItsOwn(t *testing.T) {
	svc := todoisttest.NewService(t)
	svc.RegisterApp(todoisttest.App{ClientID: "cid", ClientSecret: "csecret", RedirectURL: "https://bot.example.com/oauth/todoist/callback"})
	alice, bob := svc.NewAccount(), svc.NewAccount()
	alice.SeedInbox(3, 1)
	o := &todoist.OAuth{ClientID: "cid", ClientSecret: "csecret", AuthURL: svc.AuthURL, APIURL: svc.URL}

	got := authorize(t, o, alice, todoist.Scopes, "st-a")
	if got.Get("state") != "st-a" || got.Get("code") == "" {
		t.Fatalf("redirect query %v, want code and state st-a", got)
	}
	tokA, err := o.Exchange(t.Context(), got.Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Exchange(t.Context(), got.Get("code")); !errors.Is(err, todoist.ErrBadCode) {
		t.Errorf("second exchange of one code: %v, want ErrBadCode", err)
	}
	tokB, err := o.Exchange(t.Context(), authorize(t, o, bob, todoist.Scopes, "st-b").Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, tok string
		want      int
	}{{"alice", tokA, 3}, {"bob", tokB, 0}} {
		snap, err := todoist.New(c.tok, svc.URL, nil).Snapshot(t.Context())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(snap.Tasks) != c.want {
			t.Errorf("%s sees %d tasks, want %d", c.name, len(snap.Tasks), c.want)
		}
	}

	if err := o.Revoke(t.Context(), tokA); err != nil {
		t.Fatal(err)
	}
	if _, err := todoist.New(tokA, svc.URL, nil).Snapshot(t.Context()); err == nil || !strings.Contains(err.Error(), "rejected the token") {
		t.Errorf("a revoked token: %v, want Todoist's refusal", err)
	}
	if _, err := todoist.New(tokB, svc.URL, nil).Snapshot(t.Context()); err != nil {
		t.Errorf("bob's token after alice revoked hers: %v", err)
	}
}

func TestOAuthErrors(t *testing.T) {
	svc := todoisttest.NewService(t)
	svc.RegisterApp(todoisttest.App{ClientID: "cid", ClientSecret: "csecret", RedirectURL: "https://bot.example.com/oauth/todoist/callback"})
	acct := svc.NewAccount()
	o := &todoist.OAuth{ClientID: "cid", ClientSecret: "csecret", AuthURL: svc.AuthURL, APIURL: svc.URL}
	if got := authorize(t, o, acct, []string{"data:everything"}, "s"); got.Get("error") != "invalid_scope" || got.Get("code") != "" {
		t.Errorf("unknown scope: %v, want error=invalid_scope", got)
	}
	acct.Deny()
	if got := authorize(t, o, acct, todoist.Scopes, "s"); got.Get("error") != "access_denied" || got.Get("state") != "s" {
		t.Errorf("denied: %v, want error=access_denied with the state", got)
	}
	if _, err := o.Exchange(t.Context(), "made-up"); !errors.Is(err, todoist.ErrBadCode) {
		t.Errorf("made-up code: %v, want ErrBadCode", err)
	}
	code := authorize(t, o, acct, todoist.Scopes, "s").Get("code")
	wrong := *o
	wrong.ClientSecret = "nope"
	if _, err := wrong.Exchange(t.Context(), code); err == nil || strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "incorrect_application_credentials") {
		t.Errorf("wrong secret: %v, want incorrect_application_credentials without the secret", err)
	}
	if err := wrong.Revoke(t.Context(), "x"); err == nil || strings.Contains(err.Error(), "nope") {
		t.Errorf("revoke with a wrong secret: %v, want an error without the secret", err)
	}
}

// TestScopesCoverTheActions: the scopes the bot asks for let it do what
// its actions and /undo do, a project delete (project:delete) included;
// a token granted less gets a plain answer naming the scope missing and
// how to grant it.
func TestScopesCoverTheActions(t *testing.T) {
	svc := todoisttest.NewService(t)
	svc.RegisterApp(todoisttest.App{ClientID: "cid", ClientSecret: "csecret", RedirectURL: "https://bot.example.com/oauth/todoist/callback"})
	acct := svc.NewAccount()
	acct.SeedInbox(1, 0)
	o := &todoist.OAuth{ClientID: "cid", ClientSecret: "csecret", AuthURL: svc.AuthURL, APIURL: svc.URL}
	tok, err := o.Exchange(t.Context(), authorize(t, o, acct, todoist.Scopes, "s").Get("code"))
	if err != nil {
		t.Fatal(err)
	}
	c := todoist.New(tok, svc.URL, nil)
	snap, err := c.Snapshot(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Apply(t.Context(), []agent.Write{{Kind: agent.AddProject, UUID: agent.NewUUID(), TempID: "tmp-garden", Name: "Garden"}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	res, err = c.Apply(t.Context(), []agent.Write{
		{Kind: agent.DeleteProject, UUID: agent.NewUUID(), ID: res[0].NewID},
		{Kind: agent.DeleteTask, UUID: agent.NewUUID(), ID: snap.Tasks[0].ID},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("with todoist.Scopes %v: %v %+v", todoist.Scopes, err, res)
	}

	// A connection made with fewer scopes (team mode used to ask for
	// data:read_write,data:delete only).
	old := todoist.New(acct.Grant("data:read_write", "data:delete"), svc.URL, nil)
	res, err = old.Apply(t.Context(), []agent.Write{{Kind: agent.AddProject, UUID: agent.NewUUID(), TempID: "tmp-shed", Name: "Shed"}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("create: %v %v", err, res)
	}
	res, err = old.Apply(t.Context(), []agent.Write{{Kind: agent.DeleteProject, UUID: agent.NewUUID(), ID: res[0].NewID}})
	if err != nil {
		t.Fatal(err)
	}
	msg := agent.ErrorMessageOf(res[0].Err)
	if agent.ErrorCodeOf(res[0].Err) != agent.ErrForbidden || !strings.Contains(msg, "project:delete") || !strings.Contains(msg, "/connect") || strings.Contains(msg, "TODOIST_TOKEN") {
		t.Errorf("project delete without project:delete: %s %q, want forbidden, naming the scope and how to grant it", agent.ErrorCodeOf(res[0].Err), msg)
	}
}

// TestRevoke: a token is revoked at POST /api/v1/revoke (RFC 7009, the
// TypeScript SDK's revokeToken), and at the legacy DELETE
// /api/v1/access_tokens only where the first answers 404.
func TestRevoke(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		svc := todoisttest.NewService(t)
		svc.RegisterApp(todoisttest.App{ClientID: "cid", ClientSecret: "csecret", RedirectURL: "https://bot.example.com/oauth/todoist/callback"})
		if legacy {
			svc.WithoutRevoke()
		}
		acct := svc.NewAccount()
		tok := acct.Grant(todoist.Scopes...)
		o := &todoist.OAuth{ClientID: "cid", ClientSecret: "csecret", AuthURL: svc.AuthURL, APIURL: svc.URL}
		if err := o.Revoke(t.Context(), tok); err != nil {
			t.Fatalf("legacy %v: %v", legacy, err)
		}
		if len(acct.Tokens()) != 0 {
			t.Errorf("legacy %v: the token is still in force", legacy)
		}
		want := map[string]int{"POST /api/v1/revoke": 1}
		if legacy {
			want["DELETE /api/v1/access_tokens"] = 1
		}
		if got := svc.RevokeRequests(); !maps.Equal(got, want) {
			t.Errorf("legacy %v: revocation requests %v, want %v", legacy, got, want)
		}
		// A token Todoist no longer knows is revoked already.
		if err := o.Revoke(t.Context(), tok); err != nil {
			t.Errorf("legacy %v: revoking again: %v", legacy, err)
		}
	}
}

// TestScopeErrorNamesTheScope: a write refused for want of a scope is
// answered with the scope it needs, for every kind (a section delete
// needs data:delete; it once named none).
func TestScopeErrorNamesTheScope(t *testing.T) {
	svc := todoisttest.NewService(t)
	acct := svc.NewAccount()
	proj := acct.AddProject(todoisttest.Project{Name: "Home"})
	sec := acct.AddSection(todoisttest.Section{ProjectID: proj.ID, Name: "Kitchen"})
	c := todoist.New(acct.Grant("data:read_write"), svc.URL, nil)
	res, err := c.Apply(t.Context(), []agent.Write{{Kind: agent.DeleteSection, UUID: agent.NewUUID(), ID: sec.ID}})
	if err != nil {
		t.Fatal(err)
	}
	msg := agent.ErrorMessageOf(res[0].Err)
	if agent.ErrorCodeOf(res[0].Err) != agent.ErrForbidden || !strings.Contains(msg, "delete a section") || !strings.Contains(msg, "the data:delete permission") {
		t.Errorf("section delete without data:delete: %s %q, want forbidden, naming what and the scope", agent.ErrorCodeOf(res[0].Err), msg)
	}
}
