package main

import (
	"strings"
	"testing"
)

func TestTeamModeSettings(t *testing.T) {
	key := "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc="
	team := func(c *Config) {
		c.TodoistToken, c.ClientID, c.ClientSecret, c.PublicURL, c.SecretKey = "", "cid", "csecret", "https://bot.example.com", key
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string // "" : valid
	}{
		{"team mode", team, ""},
		{"a workspace entry in personal mode", func(c *Config) { c.AllowedUsers = []string{"slack:team:T0ABC"} }, "team mode only"},
		{"team mode without a key", func(c *Config) { team(c); c.SecretKey = "" }, "team mode needs TIDYBOT_SECRET_KEY"},
		{"a short key", func(c *Config) { team(c); c.SecretKey = "c2hvcnQ=" }, "TIDYBOT_SECRET_KEY must be 32 bytes"},
		{"a key not base64", func(c *Config) { team(c); c.SecretKey = "not base64!" }, "TIDYBOT_SECRET_KEY is not base64"},
		{"team mode without a public URL", func(c *Config) { team(c); c.PublicURL = "" }, "team mode needs TIDYBOT_PUBLIC_URL"},
		{"a public URL over http", func(c *Config) { team(c); c.PublicURL = "http://bot.example.com" }, "TIDYBOT_PUBLIC_URL must be the https address"},
		{"the client id alone", func(c *Config) { c.ClientID = "cid" }, "both TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET"},
		{"telegram:* in personal mode", func(c *Config) { c.AllowedUsers = []string{"telegram:*"} }, "team mode only"},
		{"telegram:* in team mode", func(c *Config) { team(c); c.AllowedUsers = []string{"telegram:*", "slack:team:T0ABC"} }, ""},
		{"a bad workspace id", func(c *Config) { team(c); c.AllowedUsers = []string{"slack:team:U0ABC"} }, "Slack workspace ids look like T0ABC123"},
		{"a rotation", func(c *Config) { team(c); c.SecretKey = key + "," + key }, ""},
		{"a bad old key", func(c *Config) { team(c); c.SecretKey = key + ",c2hvcnQ=" }, "TIDYBOT_SECRET_KEY must be 32 bytes"},
		{"a negative cap", func(c *Config) { c.DailyTokens = -1 }, "TIDYBOT_USER_DAILY_TOKENS"},
		{"no token, no team", func(c *Config) { c.TodoistToken = "" }, "TODOIST_TOKEN is not set"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			err := validate(c, true)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one saying %q", err, tt.want)
			case err != nil && strings.Contains(err.Error(), key):
				t.Errorf("the error shows the key: %v", err)
			}
		})
	}
	c := validConfig()
	team(&c)
	if err := validate(c, false); err == nil || !strings.Contains(err.Error(), "serve only") {
		t.Errorf("chat in team mode: %v, want refused", err)
	}
}
