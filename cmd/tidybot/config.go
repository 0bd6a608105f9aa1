package main

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"
)

// Config is every setting, read from the environment. `tidybot -h` lists
// them with their defaults.
type Config struct {
	OpenAIKey     string        `envconfig:"OPENAI_API_KEY" desc:"model API key (secret; may be empty for a local server)"`
	OpenAIBaseURL string        `envconfig:"OPENAI_BASE_URL" default:"https://api.openai.com/v1" desc:"any OpenAI-compatible endpoint (Ollama: http://localhost:11434/v1)"`
	OpenAIModel   string        `envconfig:"OPENAI_MODEL" default:"gpt-4.1-mini" desc:"model name"`
	TodoistToken  string        `envconfig:"TODOIST_TOKEN" desc:"Todoist API token (secret): Settings → Integrations → Developer"`
	TodoistURL    string        `envconfig:"TODOIST_API_URL" default:"https://api.todoist.com/api/v1" desc:"Todoist API base URL"`
	TelegramToken string        `envconfig:"TELEGRAM_BOT_TOKEN" desc:"enables the Telegram adapter (secret)"`
	TelegramURL   string        `envconfig:"TELEGRAM_API_URL" default:"https://api.telegram.org" desc:"Telegram Bot API base URL, no /bot and no trailing slash"`
	TelegramHook  string        `envconfig:"TELEGRAM_WEBHOOK_URL" desc:"webhook mode when set; long polling otherwise"`
	TelegramHookS string        `envconfig:"TELEGRAM_WEBHOOK_SECRET" desc:"secret checked on every webhook request (secret)"`
	SlackBotToken string        `envconfig:"SLACK_BOT_TOKEN" desc:"enables the Slack adapter (secret)"`
	SlackAppToken string        `envconfig:"SLACK_APP_TOKEN" desc:"Socket Mode when set (secret)"`
	SlackSigning  string        `envconfig:"SLACK_SIGNING_SECRET" desc:"Events API over HTTP when set (secret)"`
	SlackURL      string        `envconfig:"SLACK_API_URL" default:"https://slack.com/api/" desc:"Slack API base URL, ending in /api/"`
	DB            string        `envconfig:"TIDYBOT_DB" default:"tidybot.db" desc:"bbolt database file"`
	HTTPAddr      string        `envconfig:"TIDYBOT_HTTP_ADDR" default:":8080" desc:"webhooks, /healthz, /metrics (serve only)"`
	AllowedUsers  []string      `envconfig:"TIDYBOT_ALLOWED_USERS" desc:"who is served, e.g. telegram:123456,slack:U0ABC"`
	Protocol      string        `envconfig:"TIDYBOT_PROTOCOL" default:"tools" desc:"tools (native function calling) or json (JSON-schema ReAct)"`
	MaxSteps      int           `envconfig:"TIDYBOT_MAX_STEPS" default:"20" desc:"model calls per run"`
	MaxTokens     int           `envconfig:"TIDYBOT_MAX_TOKENS" default:"1024" desc:"max response tokens per model call"`
	TokenBudget   int           `envconfig:"TIDYBOT_TOKEN_BUDGET" default:"200000" desc:"prompt plus completion tokens per run"`
	History       int           `envconfig:"TIDYBOT_HISTORY" default:"15" desc:"earlier chat messages given to the model"`
	Temperature   float32       `envconfig:"TIDYBOT_TEMPERATURE" default:"0" desc:"sampling temperature"`
	RunTimeout    time.Duration `envconfig:"TIDYBOT_RUN_TIMEOUT" default:"5m" desc:"wall-clock limit of one run"`
	Workers       int           `envconfig:"TIDYBOT_WORKERS" default:"4" desc:"concurrent runs (one per thread at a time)"`
	Confirm       string        `envconfig:"TIDYBOT_CONFIRM" default:"destructive" desc:"destructive, writes or never: which actions wait for a button"`
	LogLevel      string        `envconfig:"TIDYBOT_LOG_LEVEL" default:"info" desc:"debug, info, warn or error (chat logs warnings and errors only unless set)"`
}

// LoadConfig reads the environment.
func LoadConfig() (Config, error) {
	var c Config
	if err := envconfig.Process("", &c); err != nil {
		// envconfig names the variable and the bad value; values of our
		// settings that fail to parse are numbers and durations, never
		// secrets.
		return c, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// Usage prints every variable with its default, in columns.
func Usage(w io.Writer) error {
	var c Config
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if err := envconfig.Usagef("", &c, tw, "  VARIABLE\tDEFAULT\tMEANING\n{{range .}}  {{usage_key .}}\t{{usage_default .}}\t{{usage_description .}}\n{{end}}"); err != nil {
		return err
	}
	return tw.Flush()
}

// Validate checks the settings a command needs; each problem is one clear
// line naming the variable.
func (c Config) Validate(serve bool) error {
	var errs []error
	if c.OpenAIKey == "" && strings.TrimRight(c.OpenAIBaseURL, "/") == "https://api.openai.com/v1" {
		errs = append(errs, errors.New("no model configured: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for a local server (for Ollama: OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=llama3.1)"))
	}
	if c.TodoistToken == "" {
		errs = append(errs, errors.New("TODOIST_TOKEN is not set: create a token in Todoist under Settings → Integrations → Developer"))
	}
	for name, v := range map[string]string{"OPENAI_BASE_URL": c.OpenAIBaseURL, "TODOIST_API_URL": c.TodoistURL, "TELEGRAM_API_URL": c.TelegramURL, "SLACK_API_URL": c.SlackURL} {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s must be an http(s) URL", name))
		}
	}
	if c.Protocol != "tools" && c.Protocol != "json" {
		errs = append(errs, fmt.Errorf("TIDYBOT_PROTOCOL must be tools or json, not %q", c.Protocol))
	}
	switch c.Confirm {
	case "destructive", "writes", "never":
	default:
		errs = append(errs, fmt.Errorf("TIDYBOT_CONFIRM must be destructive, writes or never, not %q", c.Confirm))
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"TIDYBOT_MAX_STEPS", c.MaxSteps}, {"TIDYBOT_MAX_TOKENS", c.MaxTokens}, {"TIDYBOT_TOKEN_BUDGET", c.TokenBudget}, {"TIDYBOT_HISTORY", c.History}, {"TIDYBOT_WORKERS", c.Workers}} {
		if n.v <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", n.name))
		}
	}
	if c.RunTimeout <= 0 {
		errs = append(errs, errors.New("TIDYBOT_RUN_TIMEOUT must be positive"))
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		errs = append(errs, errors.New("TIDYBOT_TEMPERATURE must be between 0 and 2"))
	}
	for _, u := range c.AllowedUsers {
		p, id, ok := strings.Cut(strings.TrimSpace(u), ":")
		if !ok || id == "" || (p != "telegram" && p != "slack") {
			errs = append(errs, fmt.Errorf("TIDYBOT_ALLOWED_USERS: %q is not telegram:<user id> or slack:<user id>", u))
		}
	}
	if strings.HasSuffix(c.TelegramURL, "/") || strings.Contains(c.TelegramURL, "/bot") {
		errs = append(errs, errors.New("TELEGRAM_API_URL must have no /bot and no trailing slash"))
	}
	if !strings.HasSuffix(c.SlackURL, "/api/") {
		errs = append(errs, errors.New("SLACK_API_URL must end in /api/"))
	}
	if serve {
		if c.TelegramHook != "" && c.TelegramHookS == "" {
			errs = append(errs, errors.New("TELEGRAM_WEBHOOK_URL is set but TELEGRAM_WEBHOOK_SECRET is not: webhook requests could not be checked"))
		}
		if c.SlackBotToken != "" && c.SlackAppToken == "" && c.SlackSigning == "" {
			errs = append(errs, errors.New("SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (Events API) is"))
		}
	}
	return errors.Join(errs...)
}
