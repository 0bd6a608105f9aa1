package main

import (
	"slices"
	"strings"
	"testing"
)

// validConfig is a config that passes Validate for serve.
func validConfig() Config {
	return Config{
		OpenAIKey: "sk-test-0123456789", OpenAIBaseURL: "https://api.openai.com/v1", OpenAIModel: "gpt-4.1-mini",
		TodoistToken: "0123456789abcdef0123456789abcdef01234567", TodoistURL: "https://api.todoist.com/api/v1",
		TelegramURL: "https://api.telegram.org", SlackURL: "https://slack.com/api/",
		DB: "tidybot.db", HTTPAddr: ":8080", MetricsAddr: "127.0.0.1:9090",
		Protocol: "tools", MaxSteps: 20, MaxTokens: 1024, TokenBudget: 200000, History: 15,
		RunTimeout: 60e9, Workers: 4, Confirm: "destructive", LogLevel: "info", LogFormat: "text",
		Retention: 720 * 3600e9, HTTPOnly: true,
	}
}

func TestValidateRefusesEveryBadValue(t *testing.T) {
	if err := validate(validConfig(), true); err != nil {
		t.Fatalf("the valid config is refused: %v", err)
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"log level verbose", func(c *Config) { c.LogLevel = "verbose" }, "TIDYBOT_LOG_LEVEL"},
		{"log format xml", func(c *Config) { c.LogFormat = "xml" }, "TIDYBOT_LOG_FORMAT"},
		{"protocol", func(c *Config) { c.Protocol = "xml" }, "TIDYBOT_PROTOCOL"},
		{"confirm", func(c *Config) { c.Confirm = "always" }, "TIDYBOT_CONFIRM"},
		{"max steps", func(c *Config) { c.MaxSteps = 0 }, "TIDYBOT_MAX_STEPS"},
		{"max tokens", func(c *Config) { c.MaxTokens = -1 }, "TIDYBOT_MAX_TOKENS"},
		{"token budget", func(c *Config) { c.TokenBudget = 0 }, "TIDYBOT_TOKEN_BUDGET"},
		{"history", func(c *Config) { c.History = 0 }, "TIDYBOT_HISTORY"},
		{"workers", func(c *Config) { c.Workers = 0 }, "TIDYBOT_WORKERS"},
		{"run timeout", func(c *Config) { c.RunTimeout = 0 }, "TIDYBOT_RUN_TIMEOUT"},
		{"retention", func(c *Config) { c.Retention = 60e9 }, "TIDYBOT_RETENTION"},
		{"temperature", func(c *Config) { c.Temperature = 3 }, "TIDYBOT_TEMPERATURE"},
		{"model", func(c *Config) { c.OpenAIModel = " " }, "OPENAI_MODEL"},
		{"db", func(c *Config) { c.DB = "" }, "TIDYBOT_DB"},
		{"base URL", func(c *Config) { c.OpenAIBaseURL = "localhost:11434" }, "OPENAI_BASE_URL"},
		{"todoist URL", func(c *Config) { c.TodoistURL = "ftp://x" }, "TODOIST_API_URL"},
		{"slack URL", func(c *Config) { c.SlackURL = "https://slack.com/api" }, "SLACK_API_URL"},
		{"http addr", func(c *Config) { c.HTTPAddr = "8080" }, "TIDYBOT_HTTP_ADDR"},
		{"http addr port", func(c *Config) { c.HTTPAddr = ":http-alt" }, "TIDYBOT_HTTP_ADDR"},
		{"metrics addr", func(c *Config) { c.MetricsAddr = "localhost" }, "TIDYBOT_METRICS_ADDR"},
		{"metrics on the webhook port", func(c *Config) { c.MetricsAddr = c.HTTPAddr }, "TIDYBOT_METRICS_ADDR"},
		{"telegram token", func(c *Config) { c.TelegramToken = "not-a-token-secretvalue" }, "TELEGRAM_BOT_TOKEN"},
		{"slack bot token", func(c *Config) { c.SlackBotToken, c.SlackAppToken = "xapp-secretvalue", "xapp-1" }, "SLACK_BOT_TOKEN"},
		{"slack app token", func(c *Config) { c.SlackBotToken, c.SlackAppToken = "xoxb-1", "xoxb-secretvalue" }, "SLACK_APP_TOKEN"},
		{"webhook secret", func(c *Config) { c.TelegramWebhookSecret = "secret value!" }, "TELEGRAM_WEBHOOK_SECRET"},
		{"webhook URL http", func(c *Config) {
			c.TelegramHook, c.TelegramWebhookSecret = "http://bot.example.com/telegram/webhook", "s3cret"
		}, "TELEGRAM_WEBHOOK_URL"},
		{"webhook without secret", func(c *Config) { c.TelegramHook = "https://bot.example.com/telegram/webhook" }, "TELEGRAM_WEBHOOK_SECRET"},
		{"slack without a way in", func(c *Config) { c.SlackBotToken = "xoxb-1" }, "neither SLACK_APP_TOKEN"},
		{"discord token with Bot", func(c *Config) { c.DiscordToken = "Bot secretvalue" }, "DISCORD_BOT_TOKEN"},
		{"discord URL", func(c *Config) { c.DiscordURL = "discord.com" }, "DISCORD_API_URL"},
		{"discord public key", func(c *Config) { c.DiscordToken, c.DiscordPublicKey = "secretvalue", "abc" }, "DISCORD_PUBLIC_KEY"},
		{"discord guild id", func(c *Config) { c.DiscordGuildID = "my-server" }, "DISCORD_GUILD_ID"},
		{"discord app id", func(c *Config) { c.DiscordAppID = "12" }, "DISCORD_APP_ID"},
		{"no todoist token", func(c *Config) { c.TodoistToken = "" }, "TODOIST_TOKEN"},
		{"no model", func(c *Config) { c.OpenAIKey = "" }, "OPENAI_API_KEY"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := validConfig()
			tt.edit(&c)
			err := validate(c, true)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to name %s", err, tt.want)
			}
			for _, s := range c.Secrets() {
				if s != "" && strings.Contains(err.Error(), s) {
					t.Errorf("the error shows a secret: %v", err)
				}
			}
		})
	}
}

func TestTelegramAPIURL(t *testing.T) {
	const token = "123456:AAH-secretPart_xyz"
	for _, tt := range []struct {
		url string
		ok  bool
	}{
		{"https://api.telegram.org", true},
		{"http://bot-api.internal:8081", true}, // a self-hosted Bot API server
		{"http://localhost:8081/telegram-bot-api", true},
		{"https://robot.example.com/api", true},
		{"https://api.telegram.org/", false},
		{"https://api.telegram.org/bot", false},
		{"https://api.telegram.org/bot" + token, false},
		{"https://api.telegram.org/botXYZ", false},
		{"https://proxy.example.com/" + token + "/x", false},
	} {
		t.Run(tt.url, func(t *testing.T) {
			c := validConfig()
			c.TelegramToken, c.TelegramURL = token, tt.url
			err := validate(c, true)
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(%q) = %v, want ok=%v", tt.url, err, tt.ok)
			}
			if err != nil && (!strings.Contains(err.Error(), "TELEGRAM_API_URL") || strings.Contains(err.Error(), token)) {
				t.Errorf("err = %v: want TELEGRAM_API_URL named and the token hidden", err)
			}
		})
	}
}

func TestAllowedUsers(t *testing.T) {
	for _, tt := range []struct {
		entry, want string // want "" means accepted
	}{
		{"telegram:123456", ""},
		{"slack:U0ABC123", ""},
		{"slack:W0ABC123", ""},
		{" telegram:42", ""},
		{"telegram:@alice", "Telegram user ids are numeric"},
		{"telegram:alice", "Telegram user ids are numeric"},
		{"slack:alice", "U0ABC123"},
		{"slack:@alice", "U0ABC123"},
		{"slack:C0CHANNEL", "U0ABC123"},
		{"bob", "is not telegram:<user id>"},
		{"discord:123456789012345678", ""},
		{"discord:1", "Discord user ids are numbers"},
		{"discord:@alice", "Discord user ids are numbers"},
		{"matrix:@alice:example.org", "is not telegram:<user id>"},
		{"telegram:", "is not telegram:<user id>"},
		{"discord:server:123456789012345678", "discord:guild:SERVER_ID"},
		{"irc:guild:1", "discord:guild:<guild id>"},
		// A whole server is written discord:guild:ID, in team mode only;
		// the messages spell it so, also for the old discord:team:ID.
		{"discord:guild:123456789012345678", "team mode only"},
		{"discord:guild:12", "discord:guild:123456789012345678"},
		{"discord:team:12", "discord:guild:123456789012345678"},
		{"slack:team:12", "slack:team:T0ABC123"},
	} {
		t.Run(tt.entry, func(t *testing.T) {
			c := validConfig()
			c.AllowedUsers = []string{tt.entry}
			err := validate(c, false)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "TIDYBOT_ALLOWED_USERS")):
				t.Errorf("err = %v, want TIDYBOT_ALLOWED_USERS and %q", err, tt.want)
			}
		})
	}
}

// TestAllowlistReadsEachPlatformsWord: in team mode a Discord server is
// discord:guild:ID (Discord's word), a Slack workspace slack:team:T…
// (Slack's); both reach package bot as platform:team:ID, the one form it
// matches. discord:team:ID, the first release's spelling, still works.
func TestAllowlistReadsEachPlatformsWord(t *testing.T) {
	c := validConfig()
	c.ClientID, c.ClientSecret = "client", "client-secret"
	c.AllowedUsers = []string{" discord:guild:123456789012345678", "discord:team:223456789012345678", "slack:team:T0ABC", "discord:*", "telegram:42"}
	if err := validate(c, false); err != nil && strings.Contains(err.Error(), "TIDYBOT_ALLOWED_USERS") {
		t.Fatalf("refused: %v", err)
	}
	want := []string{"discord:team:123456789012345678", "discord:team:223456789012345678", "slack:team:T0ABC", "discord:*", "telegram:42"}
	if got := c.Allowlist(rules()); !slices.Equal(got, want) {
		t.Fatalf("Allowlist = %q, want %q", got, want)
	}
}
