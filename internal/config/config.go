// Package config is tidybot's configuration: one table of settings read
// from the environment (the Config type and its envconfig tags), their
// validation and the listing `tidybot -h` prints.
package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kelseyhightower/envconfig"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
)

// Config is every setting, read from the environment. `tidybot -h` lists
// them with their defaults. A field tagged secret:"true" holds a
// credential: it is never printed (String shows only whether it is set),
// and every log line, chat message, observation and stored transcript is
// redacted of it (see Secrets).
type Config struct {
	OpenAIKey             string        `envconfig:"OPENAI_API_KEY" secret:"true" desc:"model API key (secret; may be empty for a local server)"`
	OpenAIBaseURL         string        `envconfig:"OPENAI_BASE_URL" default:"https://api.openai.com/v1" desc:"any OpenAI-compatible endpoint (Ollama: http://localhost:11434/v1)"`
	OpenAIModel           string        `envconfig:"OPENAI_MODEL" default:"gpt-6-luna" desc:"model name (on Azure: the deployment name); checked at start-up"`
	Models                string        `envconfig:"TIDYBOT_MODELS" desc:"model tiers a person may choose with /settings model, the first the default, e.g. fast:gpt-6-luna,best:gpt-6.1-sol (empty: OPENAI_MODEL for everyone)"`
	OpenAIAPI             string        `envconfig:"OPENAI_API" default:"auto" desc:"chat (Chat Completions), responses (Responses API) or auto (Responses on OpenAI and for GPT-6, Chat elsewhere)"`
	Effort                string        `envconfig:"TIDYBOT_REASONING_EFFORT" desc:"none, minimal, low, medium, high, xhigh or max (default: low for reasoning models); temperature applies only with none"`
	ReasoningModel        bool          `envconfig:"OPENAI_REASONING_MODEL" default:"false" desc:"true: treat OPENAI_MODEL as a reasoning model whatever its name (max_completion_tokens, reasoning effort), e.g. an Azure deployment of o3"`
	TodoistToken          string        `envconfig:"TODOIST_TOKEN" secret:"true" desc:"Todoist API token (secret): Settings → Integrations → Developer"`
	TodoistURL            string        `envconfig:"TODOIST_API_URL" default:"https://api.todoist.com/api/v1" desc:"Todoist API base URL"`
	TelegramToken         string        `envconfig:"TELEGRAM_BOT_TOKEN" secret:"true" desc:"enables the Telegram adapter (secret; from @BotFather: 123456:ABC…)"`
	TelegramURL           string        `envconfig:"TELEGRAM_API_URL" default:"https://api.telegram.org" desc:"Telegram Bot API base URL (or a self-hosted Bot API server), no /bot<token> and no trailing slash"`
	TelegramHook          string        `envconfig:"TELEGRAM_WEBHOOK_URL" desc:"webhook mode when set (the https address of /telegram/webhook); long polling otherwise"`
	TelegramWebhookSecret string        `envconfig:"TELEGRAM_WEBHOOK_SECRET" secret:"true" desc:"secret checked on every webhook request (secret; 1-256 of A-Z a-z 0-9 _ -)"`
	SlackBotToken         string        `envconfig:"SLACK_BOT_TOKEN" secret:"true" desc:"enables the Slack adapter (secret; xoxb-…)"`
	SlackAppToken         string        `envconfig:"SLACK_APP_TOKEN" secret:"true" desc:"Socket Mode when set (secret; xapp-…)"`
	SlackSigningSecret    string        `envconfig:"SLACK_SIGNING_SECRET" secret:"true" desc:"Events API over HTTP when set (secret)"`
	SlackURL              string        `envconfig:"SLACK_API_URL" default:"https://slack.com/api/" desc:"Slack API base URL, ending in /api/"`
	DiscordToken          string        `envconfig:"DISCORD_BOT_TOKEN" secret:"true" desc:"enables the Discord adapter (secret; developer portal → Bot → Reset Token)"`
	DiscordURL            string        `envconfig:"DISCORD_API_URL" default:"https://discord.com" desc:"Discord API base URL (the REST API is under /api/v9/; the gateway's address comes from GET /gateway)"`
	DiscordPublicKey      string        `envconfig:"DISCORD_PUBLIC_KEY" desc:"interactions over HTTP when set (POST /discord/interactions, each request's Ed25519 signature checked): the portal's General Information → Public Key, 64 hex digits"`
	DiscordAppID          string        `envconfig:"DISCORD_APP_ID" desc:"the application id (empty: read from the gateway's READY)"`
	DiscordGuildID        string        `envconfig:"DISCORD_GUILD_ID" desc:"register the slash commands in this server only, where they show at once (empty: globally)"`
	DiscordMessageContent bool          `envconfig:"DISCORD_MESSAGE_CONTENT" default:"false" desc:"true: ask for the privileged Message Content intent (switch it on in the portal first); the bot works without it through mentions, DMs and slash commands"`
	DB                    string        `envconfig:"TIDYBOT_DB" default:"tidybot.db" desc:"bbolt database file"`
	DatabaseURL           string        `envconfig:"TIDYBOT_DATABASE_URL" secret:"true" desc:"postgres://user:password@host:5432/db: keep everything in PostgreSQL instead of TIDYBOT_DB (secret: it may hold a password); schema migrated at start or by tidybot migrate"`
	HTTPAddr              string        `envconfig:"TIDYBOT_HTTP_ADDR" default:":8080" desc:"webhooks, /healthz, the OAuth callback and run pages (serve only)"`
	MetricsAddr           string        `envconfig:"TIDYBOT_METRICS_ADDR" default:"127.0.0.1:9090" desc:"/metrics on its own address (serve only); empty turns it off"`
	AllowedUsers          []string      `envconfig:"TIDYBOT_ALLOWED_USERS" desc:"who is served, e.g. telegram:123456,slack:U0ABC,discord:123456789012345678 (numeric Telegram ids, Slack member ids, Discord user ids)"`
	Protocol              string        `envconfig:"TIDYBOT_PROTOCOL" default:"tools" desc:"tools (native function calling) or json (JSON-schema ReAct)"`
	MaxSteps              int           `envconfig:"TIDYBOT_MAX_STEPS" default:"20" desc:"model calls per run"`
	MaxTokens             int           `envconfig:"TIDYBOT_MAX_TOKENS" default:"24576" desc:"max response tokens per model call (reasoning included): room for the largest batch"`
	TokenBudget           int           `envconfig:"TIDYBOT_TOKEN_BUDGET" default:"200000" desc:"prompt plus completion tokens per run"`
	History               int           `envconfig:"TIDYBOT_HISTORY" default:"15" desc:"earlier chat messages given to the model"`
	Temperature           float32       `envconfig:"TIDYBOT_TEMPERATURE" default:"0" desc:"sampling temperature"`
	RunTimeout            time.Duration `envconfig:"TIDYBOT_RUN_TIMEOUT" default:"5m" desc:"working time of one run (time waiting for you does not count)"`
	Workers               int           `envconfig:"TIDYBOT_WORKERS" default:"4" desc:"concurrent runs (one per thread at a time)"`
	Confirm               string        `envconfig:"TIDYBOT_CONFIRM" default:"destructive" desc:"destructive, writes or never: which actions wait for a button"`
	LogLevel              string        `envconfig:"TIDYBOT_LOG_LEVEL" default:"info" desc:"debug, info, warn or error (chat logs warnings and errors only unless set)"`
	LogFormat             string        `envconfig:"TIDYBOT_LOG_FORMAT" default:"text" desc:"text or json (one JSON object a line, for containers)"`
	Retention             time.Duration `envconfig:"TIDYBOT_RETENTION" default:"720h" desc:"messages, runs (with transcripts) and the audit journal older than this are deleted"`
	PublicURL             string        `envconfig:"TIDYBOT_PUBLIC_URL" desc:"the https address people and Todoist reach serve at: final messages carry a Details link to the run's page; team mode's OAuth callback is <this>/oauth/todoist/callback"`
	SecretKey             string        `envconfig:"TIDYBOT_SECRET_KEY" secret:"true" desc:"32 bytes, base64 (openssl rand -base64 32; secret): signs run links and OAuth state, encrypts stored Todoist tokens and the keys that seal stored conversations; new,old while rotating; generated and kept in the database when unset, except in team mode, which requires it"`
	RunLinkTTL            time.Duration `envconfig:"TIDYBOT_RUN_LINK_TTL" default:"168h" desc:"how long a run's Details link works"`
	TranscribeModel       string        `envconfig:"TIDYBOT_TRANSCRIBE_MODEL" default:"gpt-transcribe" desc:"speech-to-text model for voice notes; empty turns voice notes off"`
	TranscribeURL         string        `envconfig:"TIDYBOT_TRANSCRIBE_URL" desc:"an OpenAI-compatible /audio/transcriptions server (default: OPENAI_BASE_URL), e.g. http://localhost:8000/v1 for speaches"`
	TranscribeKey         string        `envconfig:"TIDYBOT_TRANSCRIBE_API_KEY" secret:"true" desc:"key of the speech server (secret; default: OPENAI_API_KEY when TIDYBOT_TRANSCRIBE_URL is unset)"`
	VoiceMax              time.Duration `envconfig:"TIDYBOT_VOICE_MAX" default:"5m" desc:"longest voice note accepted; a longer one is refused before it is downloaded"`
	Vision                string        `envconfig:"TIDYBOT_VISION" default:"auto" desc:"auto, on or off: photos go to the model as images (auto: until the model rejects them)"`
	ClientID              string        `envconfig:"TODOIST_CLIENT_ID" desc:"team mode: the Client ID of your app in Todoist's App Management Console; each person connects their own Todoist"`
	ClientSecret          string        `envconfig:"TODOIST_CLIENT_SECRET" secret:"true" desc:"team mode: the app's Client secret (secret)"`
	TodoistAuth           string        `envconfig:"TODOIST_AUTH_URL" default:"https://todoist.com" desc:"Todoist OAuth base URL (/oauth/authorize, /oauth/access_token)"`
	DailyTokens           int           `envconfig:"TIDYBOT_USER_DAILY_TOKENS" default:"2000000" desc:"model tokens per person per UTC day, on by default (about ten runs at the per-run budget, far above a normal day: docs/performance.md); a run stops at the cap (0: no cap)"`
	AutopilotHourlyTokens int           `envconfig:"TIDYBOT_AUTOPILOT_HOURLY_TOKENS" default:"100000" desc:"model tokens one person's autopilot runs may use per hour; once its runs of the last hour have spent it, new tasks wait (0: no cap)"`
	AutopilotInterval     time.Duration `envconfig:"TIDYBOT_AUTOPILOT_INTERVAL" default:"1m" desc:"how often autopilot looks for new inbox tasks of the people who turned it on (one small incremental /sync each; a Todoist webhook tells it at once in team mode)"`
	HTTPOnly              bool          `envconfig:"TIDYBOT_HTTP_ONLY" default:"false" desc:"true: serve starts with no platform token, serving only its HTTP routes (run pages, /healthz); without it, serve refuses to start with no platform"`
	CPUProfile            string        `envconfig:"TIDYBOT_CPU_PROFILE" desc:"for measuring: write a CPU profile of the process to this file until it exits (go tool pprof reads it), and its heap allocations to the file named like it with .allocs added; empty: none"`
	Trace                 string        `envconfig:"TIDYBOT_TRACE" desc:"for measuring: write a runtime trace of the process to this file until it exits (go tool trace reads it: where goroutines wait); empty: none"`
}

// OllamaExample is the model the error messages, docs/models.md and
// deploy/tidybot.env.example name for Ollama (one model everywhere: a test
// checks them).
const OllamaExample = "qwen2.5:14b"

// TeamMode reports whether each person connects their own Todoist
// (TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET set).
// AutopilotTokensPerHour is the hourly autopilot token budget the bot
// is given: TIDYBOT_AUTOPILOT_HOURLY_TOKENS, where 0 means no cap.
func (c Config) AutopilotTokensPerHour() int {
	if c.AutopilotHourlyTokens <= 0 {
		return math.MaxInt
	}
	return c.AutopilotHourlyTokens
}

func (c Config) TeamMode() bool { return c.ClientID != "" && c.ClientSecret != "" }

// Load reads the environment.
func Load() (Config, error) {
	var c Config
	if err := envconfig.Process("", &c); err != nil {
		return c, loadError(err)
	}
	return c, nil
}

// kinds says, by Go type, what a setting's value must look like.
var kinds = map[string]string{
	"int":           "a whole number, e.g. 10",
	"float32":       "a number, e.g. 0.2",
	"float64":       "a number, e.g. 0.2",
	"bool":          "true or false",
	"time.Duration": "a duration such as 90s, 5m or 2h",
}

// loadError turns envconfig's error for a value that does not parse
// into the one line Validate gives any other bad value: the variable,
// what it takes, and the value (never a secret's).
func loadError(err error) error {
	var pe *envconfig.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("configuration: %w", err)
	}
	want, ok := kinds[pe.TypeName]
	if !ok {
		want = "a " + pe.TypeName
	}
	if f, ok := reflect.TypeFor[Config]().FieldByName(pe.FieldName); ok && f.Tag.Get("secret") == "true" {
		return fmt.Errorf("%s must be %s", pe.KeyName, want)
	}
	return fmt.Errorf("%s must be %s, not %q", pe.KeyName, want, pe.Value)
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

// Secrets returns the value of every setting tagged secret, set or not
// (an agent.Redactor skips empty ones).
func (c Config) Secrets() []string {
	var out []string
	v := reflect.ValueOf(c)
	for _, f := range reflect.VisibleFields(v.Type()) {
		if f.Tag.Get("secret") == "true" {
			out = append(out, v.FieldByIndex(f.Index).String())
		}
	}
	return append(out, databaseSecrets(c.DatabaseURL)...)
}

// String lists every setting as VARIABLE=value, one a line, in the order
// of Config; a secret shows only whether it is set.
func (c Config) String() string {
	var b strings.Builder
	v := reflect.ValueOf(c)
	for _, f := range reflect.VisibleFields(v.Type()) {
		fv := v.FieldByIndex(f.Index)
		val := fmt.Sprint(fv.Interface())
		if xs, ok := fv.Interface().([]string); ok {
			val = strings.Join(xs, ",")
		}
		if f.Tag.Get("secret") == "true" {
			val = "(not set)"
			if fv.String() != "" {
				val = "(set, hidden)"
			}
		}
		fmt.Fprintf(&b, "%s=%s\n", f.Tag.Get("envconfig"), val)
	}
	return b.String()
}

// LogValue implements slog.LogValuer: the settings, secrets hidden.
func (c Config) LogValue() slog.Value {
	var as []slog.Attr
	for _, line := range strings.Split(strings.TrimSpace(c.String()), "\n") {
		k, v, _ := strings.Cut(line, "=")
		as = append(as, slog.String(k, v))
	}
	return slog.GroupValue(as...)
}

// Log levels by TIDYBOT_LOG_LEVEL.
var LogLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// Logger logs to w at TIDYBOT_LOG_LEVEL in TIDYBOT_LOG_FORMAT, every
// record through wrap (a redactor's Handler). terminal says w shares a
// terminal with a conversation (tidybot chat): the default level, info,
// is then warn, keeping the terminal for the conversation.
func (c Config) Logger(w io.Writer, terminal bool, wrap func(slog.Handler) slog.Handler) *slog.Logger {
	level, ok := LogLevels[strings.ToLower(c.LogLevel)]
	if !ok {
		level = slog.LevelInfo
	}
	if terminal && os.Getenv("TIDYBOT_LOG_LEVEL") == "" && strings.EqualFold(c.LogLevel, "info") {
		level = slog.LevelWarn
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if strings.EqualFold(c.LogFormat, "json") {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(wrap(h))
}

var (
	// telegramToken is BotFather's format: the bot's numeric id, a colon,
	// then the secret part (core.telegram.org/bots/api#authorizing-your-bot).
	telegramToken = regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]+$`)
	// webhookSecret is setWebhook's secret_token: "1-256 characters. Only
	// characters A-Z, a-z, 0-9, _ and - are allowed"
	// (core.telegram.org/bots/api#setwebhook).
	webhookSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
	// discordKey is an application's Ed25519 public key as the developer
	// portal shows it: 32 bytes in hex
	// (discord.com/developers/docs/interactions/overview#setting-up-an-endpoint-validating-security-request-headers).
	discordKey = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	// discordID is a snowflake (discord.com/developers/docs/reference#snowflakes).
	discordID = regexp.MustCompile(`^[0-9]{15,20}$`)
)

// Platform is what validation knows of a chat platform: its name (as in
// TIDYBOT_ALLOWED_USERS entries), the word its entries use for a whole
// workspace (Workspace), its allowlist id rule, and whether the
// configuration enables it (its token is set).
type Platform struct {
	Name string
	// Workspace is the platform's own word for a workspace in an entry
	// (Slack "team": slack:team:T…; Discord "guild", a server:
	// discord:guild:ID), "" for a platform without one. Whatever the
	// word, the entry is matched as platform:team:ID (Allowlist).
	Workspace string
	// Allow checks an entry's id as package bot matches it (a workspace
	// as "team:ID"), and words its errors with the platform's own
	// spelling.
	Allow func(id string, team bool) error
	On    func(c Config) bool
}

// teamWord is the one spelling package bot matches for a workspace's
// entry, platform:team:ID (bot/team.go).
const teamWord = "team"

// canonical is allowlist entry u (trimmed) as package bot matches it: a
// workspace written in its platform's own word (discord:guild:ID) becomes
// platform:team:ID; every other entry is unchanged (so discord:team:ID,
// the spelling of the first Discord release, still reads the same).
func canonical(u string, platforms []Platform) string {
	u = strings.TrimSpace(u)
	name, id, _ := strings.Cut(u, ":")
	for _, p := range platforms {
		if p.Name != name || p.Workspace == "" || p.Workspace == teamWord {
			continue
		}
		if ws, ok := strings.CutPrefix(id, p.Workspace+":"); ok {
			return name + ":" + teamWord + ":" + ws
		}
	}
	return u
}

// Allowlist is TIDYBOT_ALLOWED_USERS in the form package bot matches
// (canonical): this is where each platform's word for a workspace is
// read, so bot has one rule for all of them.
func (c Config) Allowlist(platforms []Platform) []string {
	var out []string
	for _, u := range c.AllowedUsers {
		if u = canonical(u, platforms); u != "" {
			out = append(out, u)
		}
	}
	return out
}

// Validate checks every setting against the platforms serve knows; each
// problem is one clear line naming the variable, and no line shows a
// secret's value.
func (c Config) Validate(serve bool, platforms []Platform) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.OpenAIKey == "" && strings.TrimRight(c.OpenAIBaseURL, "/") == "https://api.openai.com/v1" {
		errs = append(errs, errors.New("no model configured: set OPENAI_API_KEY for OpenAI, or OPENAI_BASE_URL for a local server (for Ollama: OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL="+OllamaExample+")"))
	}
	if strings.TrimSpace(c.OpenAIModel) == "" {
		bad("OPENAI_MODEL is empty: name the model to use")
	}
	if _, err := agent.ParseModelTiers(c.Models); err != nil {
		bad("TIDYBOT_MODELS: %v", err)
	}
	if c.TodoistToken == "" && !c.TeamMode() {
		errs = append(errs, errors.New("TODOIST_TOKEN is not set: create a token in Todoist under Settings → Integrations → Developer (or set TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET for team mode)"))
	}
	errs = append(errs, c.validateTeam(serve)...)
	urls := []struct{ name, v string }{{"OPENAI_BASE_URL", c.OpenAIBaseURL}, {"TODOIST_API_URL", c.TodoistURL}, {"TELEGRAM_API_URL", c.TelegramURL}, {"SLACK_API_URL", c.SlackURL}}
	if c.DiscordURL != "" { // empty: the adapter's default
		urls = append(urls, struct{ name, v string }{"DISCORD_API_URL", c.DiscordURL})
	}
	if c.TranscribeURL != "" {
		urls = append(urls, struct{ name, v string }{"TIDYBOT_TRANSCRIBE_URL", c.TranscribeURL})
	}
	if c.TodoistAuth != "" {
		urls = append(urls, struct{ name, v string }{"TODOIST_AUTH_URL", c.TodoistAuth})
	}
	for _, u := range urls {
		if p, err := url.Parse(u.v); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			bad("%s must be an http(s) URL, not %q", u.name, u.v)
		}
	}
	switch c.OpenAIAPI {
	case "", "auto", "chat", "responses":
	default:
		bad("OPENAI_API must be auto, chat or responses, not %q", c.OpenAIAPI)
	}
	if c.Effort != "" && !slices.Contains(openai.Efforts, c.Effort) {
		bad("TIDYBOT_REASONING_EFFORT must be one of %s, not %q", strings.Join(openai.Efforts, ", "), c.Effort)
	}
	if c.Protocol != "tools" && c.Protocol != "json" {
		bad("TIDYBOT_PROTOCOL must be tools or json, not %q", c.Protocol)
	}
	switch c.Confirm {
	case "destructive", "writes", "never":
	default:
		bad("TIDYBOT_CONFIRM must be destructive, writes or never, not %q", c.Confirm)
	}
	errs = append(errs, c.validateLimits()...)
	errs = append(errs, c.validatePlatforms(serve, platforms)...)
	if _, ok := LogLevels[strings.ToLower(c.LogLevel)]; !ok && c.LogLevel != "" {
		bad("TIDYBOT_LOG_LEVEL must be debug, info, warn or error, not %q", c.LogLevel)
	}
	if f := strings.ToLower(c.LogFormat); f != "" && f != "text" && f != "json" {
		bad("TIDYBOT_LOG_FORMAT must be text or json, not %q", c.LogFormat)
	}
	if strings.TrimSpace(c.DB) == "" {
		bad("TIDYBOT_DB is empty: name the database file")
	}
	if c.PublicURL != "" && !c.TeamMode() { // team mode's stricter check is validateTeam's
		if p, err := url.Parse(c.PublicURL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" || p.RawQuery != "" {
			bad("TIDYBOT_PUBLIC_URL must be the http(s) address of serve, e.g. https://tidybot.example.com, not %q", c.PublicURL)
		}
	}
	if c.SecretKey != "" {
		if _, err := SecretKeys(c.SecretKey); err != nil {
			errs = append(errs, err)
		}
	}
	if c.RunLinkTTL < 0 {
		bad("TIDYBOT_RUN_LINK_TTL must be positive, not %s", c.RunLinkTTL)
	}
	if serve {
		errs = append(errs, c.validateServe()...)
	}
	return errors.Join(errs...)
}

// validateLimits checks the numbers and choices that bound a run.
func (c Config) validateLimits() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, n := range []struct {
		name string
		v    int
	}{{"TIDYBOT_MAX_STEPS", c.MaxSteps}, {"TIDYBOT_MAX_TOKENS", c.MaxTokens}, {"TIDYBOT_TOKEN_BUDGET", c.TokenBudget}, {"TIDYBOT_HISTORY", c.History}, {"TIDYBOT_WORKERS", c.Workers}} {
		if n.v <= 0 {
			bad("%s must be positive, not %d", n.name, n.v)
		}
	}
	if c.VoiceMax < 0 {
		bad("TIDYBOT_VOICE_MAX must be positive (e.g. 5m), not %s", c.VoiceMax)
	}
	switch c.Vision {
	case "", "auto", "on", "off":
	default:
		bad("TIDYBOT_VISION must be auto, on or off, not %q", c.Vision)
	}
	if c.RunTimeout <= 0 {
		bad("TIDYBOT_RUN_TIMEOUT must be positive, not %s", c.RunTimeout)
	}
	if c.Retention < time.Hour {
		bad("TIDYBOT_RETENTION must be at least 1h (e.g. 720h for 30 days), not %s", c.Retention)
	}
	if c.Temperature < 0 || c.Temperature > 2 {
		bad("TIDYBOT_TEMPERATURE must be between 0 and 2, not %g", c.Temperature)
	}
	return errs
}

// validatePlatforms checks the allowlist and the platforms' settings;
// serve: that there is a platform to serve, configured completely.
func (c Config) validatePlatforms(serve bool, platforms []Platform) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, u := range c.AllowedUsers {
		if err := checkAllowedUser(strings.TrimSpace(u), c.TeamMode(), platforms); err != nil {
			errs = append(errs, err)
		}
	}
	if err := checkTelegramURL(c.TelegramURL, c.TelegramToken); err != nil {
		errs = append(errs, err)
	}
	if !strings.HasSuffix(c.SlackURL, "/api/") {
		bad("SLACK_API_URL must end in /api/ (slack-go appends the method name)")
	}
	// Token formats: the message names the variable, never the value.
	if c.TelegramToken != "" && !telegramToken.MatchString(c.TelegramToken) {
		bad("TELEGRAM_BOT_TOKEN is not a bot token (BotFather gives <bot id>:<secret>, e.g. 123456:ABC-DEF…)")
	}
	if c.SlackBotToken != "" && !strings.HasPrefix(c.SlackBotToken, "xoxb-") {
		bad("SLACK_BOT_TOKEN must be the bot token (xoxb-…) from OAuth & Permissions")
	}
	if c.SlackAppToken != "" && !strings.HasPrefix(c.SlackAppToken, "xapp-") {
		bad("SLACK_APP_TOKEN must be an app-level token (xapp-…) with connections:write")
	}
	if c.DiscordToken != "" && (strings.HasPrefix(c.DiscordToken, "Bot ") || strings.ContainsAny(c.DiscordToken, " \t\n")) {
		bad("DISCORD_BOT_TOKEN must be the bot token alone (developer portal → Bot → Reset Token), without \"Bot \" or spaces")
	}
	if c.DiscordPublicKey != "" && !discordKey.MatchString(c.DiscordPublicKey) {
		bad("DISCORD_PUBLIC_KEY must be the 64 hex digits of the portal's General Information → Public Key")
	}
	for _, id := range []struct{ name, v string }{{"DISCORD_APP_ID", c.DiscordAppID}, {"DISCORD_GUILD_ID", c.DiscordGuildID}} {
		if id.v != "" && !discordID.MatchString(id.v) {
			bad("%s must be a Discord id (a number of 15 to 20 digits; Copy ID in developer mode), not %q", id.name, id.v)
		}
	}
	if c.TelegramWebhookSecret != "" && !webhookSecret.MatchString(c.TelegramWebhookSecret) {
		bad("TELEGRAM_WEBHOOK_SECRET must be 1 to 256 of A-Z a-z 0-9 _ - (Telegram's rule for secret_token)")
	}
	if c.TelegramHook != "" {
		if p, err := url.Parse(c.TelegramHook); err != nil || p.Scheme != "https" || p.Host == "" {
			bad("TELEGRAM_WEBHOOK_URL must be an https URL (Telegram sends webhooks over HTTPS only), not %q", c.TelegramHook)
		}
	}
	if err := CheckDatabaseURL(c.DatabaseURL); err != nil {
		errs = append(errs, err)
	}
	if serve {
		if c.TelegramHook != "" && c.TelegramWebhookSecret == "" {
			errs = append(errs, errors.New("TELEGRAM_WEBHOOK_URL is set but TELEGRAM_WEBHOOK_SECRET is not: webhook requests could not be checked"))
		}
		if c.SlackBotToken != "" && c.SlackAppToken == "" && c.SlackSigningSecret == "" {
			errs = append(errs, errors.New("SLACK_BOT_TOKEN is set but neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (Events API) is"))
		}
		if !slices.ContainsFunc(platforms, func(p Platform) bool { return p.On(c) }) && !c.HTTPOnly {
			errs = append(errs, errors.New("no platform to serve: set TELEGRAM_BOT_TOKEN, SLACK_BOT_TOKEN with SLACK_APP_TOKEN, or DISCORD_BOT_TOKEN (see docs/telegram.md, docs/slack.md, docs/discord.md); "+
				"tidybot chat needs neither; TIDYBOT_HTTP_ONLY=true serves only the HTTP routes (run pages, /healthz)"))
		}
	}
	return errs
}

// validateServe checks serve's addresses.
func (c Config) validateServe() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := checkAddr(c.HTTPAddr); err != nil || c.HTTPAddr == "" {
		bad("TIDYBOT_HTTP_ADDR must be host:port or :port, not %q", c.HTTPAddr)
	}
	if c.MetricsAddr != "" {
		if err := checkAddr(c.MetricsAddr); err != nil {
			bad("TIDYBOT_METRICS_ADDR must be host:port, or empty to turn /metrics off, not %q", c.MetricsAddr)
		} else if c.MetricsAddr == c.HTTPAddr {
			bad("TIDYBOT_METRICS_ADDR must differ from TIDYBOT_HTTP_ADDR: /metrics is kept off the webhook port")
		}
	}
	return errs
}

// checkAllowedUser checks one TIDYBOT_ALLOWED_USERS entry by its
// platform's rule (each adapter's AllowedID), read as bot matches it
// (canonical): an entry that can never match a real id is refused, with
// the form it should take.
func checkAllowedUser(u string, team bool, platforms []Platform) error {
	name, id, _ := strings.Cut(canonical(u, platforms), ":")
	var forms []string
	for _, p := range platforms {
		if p.Name == name && id != "" {
			if err := p.Allow(id, team); err != nil {
				return fmt.Errorf("TIDYBOT_ALLOWED_USERS: %q %w", u, err)
			}
			return nil
		}
		forms = append(forms, p.Name+":<user id>")
		if p.Workspace != "" {
			forms = append(forms, p.Name+":"+p.Workspace+":<"+p.Workspace+" id>")
		}
	}
	return fmt.Errorf("TIDYBOT_ALLOWED_USERS: %q is not %s", u, strings.Join(forms, " or "))
}

// checkTelegramURL refuses a TELEGRAM_API_URL that would break the
// library's URLs (it appends /bot<token>/<method>): one that holds the
// token, ends in /bot…, or ends in a slash. A host named bot-api… (a
// self-hosted Bot API server) is fine.
func checkTelegramURL(raw, token string) error {
	if token != "" && strings.Contains(raw, token) {
		return errors.New("TELEGRAM_API_URL must not hold the bot token: set the server only (e.g. https://api.telegram.org); the token goes in TELEGRAM_BOT_TOKEN")
	}
	if strings.HasSuffix(raw, "/") {
		return fmt.Errorf("TELEGRAM_API_URL must have no trailing slash, not %q", raw)
	}
	p, err := url.Parse(raw)
	if err != nil {
		return nil // reported as not a URL above
	}
	last := p.Path[strings.LastIndex(p.Path, "/")+1:]
	if strings.HasPrefix(last, "bot") {
		return errors.New("TELEGRAM_API_URL must end before /bot<token>: set the server only (e.g. https://api.telegram.org or http://bot-api.internal:8081)")
	}
	return nil
}

// secretKey decodes TIDYBOT_SECRET_KEY: 32 bytes in standard or URL-safe
// base64. The error never shows the value.
func secretKey(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(v); err == nil {
			if len(k) != 32 {
				return nil, fmt.Errorf("TIDYBOT_SECRET_KEY must be 32 bytes in base64 (openssl rand -base64 32), not %d bytes", len(k))
			}
			return k, nil
		}
	}
	return nil, errors.New("TIDYBOT_SECRET_KEY is not base64: make one with openssl rand -base64 32")
}

// checkAddr checks a listen address: host:port or :port, port a number.
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	return nil
}

// validateTeam checks the team-mode settings: both OAuth credentials or
// neither; with them, a public address and a secret key.
func (c Config) validateTeam(serve bool) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if (c.ClientID == "") != (c.ClientSecret == "") {
		bad("team mode needs both TODOIST_CLIENT_ID and TODOIST_CLIENT_SECRET (from Todoist's App Management Console); one is set")
	}
	if c.DailyTokens < 0 {
		bad("TIDYBOT_USER_DAILY_TOKENS must be 0 (no cap) or positive, not %d", c.DailyTokens)
	}
	if c.AutopilotHourlyTokens < 0 {
		bad("TIDYBOT_AUTOPILOT_HOURLY_TOKENS must be 0 (no cap) or positive, not %d", c.AutopilotHourlyTokens)
	}
	if c.AutopilotInterval != 0 && c.AutopilotInterval < time.Second {
		bad("TIDYBOT_AUTOPILOT_INTERVAL must be at least 1s, not %s", c.AutopilotInterval)
	}
	if !c.TeamMode() {
		return errs
	}
	if c.SecretKey == "" {
		bad("team mode needs TIDYBOT_SECRET_KEY (32 bytes, base64: openssl rand -base64 32) to encrypt the Todoist tokens it stores")
	}
	if c.PublicURL == "" {
		bad("team mode needs TIDYBOT_PUBLIC_URL: the https address Todoist redirects people back to (<it>/oauth/todoist/callback)")
	} else if err := CheckPublicURL(c.PublicURL); err != nil {
		errs = append(errs, err)
	}
	if !serve {
		bad("team mode works with tidybot serve only (people connect through its /oauth/todoist/callback); unset TODOIST_CLIENT_ID for chat")
	}
	return errs
}

// CheckPublicURL: https, or http on a loopback host (a test, a tunnel's
// local end); no query.
func CheckPublicURL(raw string) error {
	p, err := url.Parse(raw)
	ok := err == nil && p.Host != "" && p.RawQuery == "" && (p.Scheme == "https" || (p.Scheme == "http" && isLoopback(p.Hostname())))
	if !ok {
		return fmt.Errorf("TIDYBOT_PUBLIC_URL must be the https address of serve, e.g. https://tidybot.example.com, not %q", raw)
	}
	return nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// SecretKeys decodes TIDYBOT_SECRET_KEY: one key, or during a rotation
// the new key, a comma, and the old one(s). The first encrypts and signs;
// every one decrypts and verifies.
func SecretKeys(v string) ([][]byte, error) {
	var keys [][]byte
	for _, part := range strings.Split(v, ",") {
		k, err := secretKey(part)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// databaseSecrets are the parts of TIDYBOT_DATABASE_URL to redact besides
// the whole: its password, which a driver's message may quote alone.
func databaseSecrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return nil
	}
	if p, ok := u.User.Password(); ok && p != "" {
		return []string{p}
	}
	return nil
}

// CheckDatabaseURL says what is wrong with TIDYBOT_DATABASE_URL, never
// quoting it (it may hold a password).
func CheckDatabaseURL(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" {
		return errors.New("TIDYBOT_DATABASE_URL must be a PostgreSQL URL, postgres://user:password@host:5432/database (unset: bbolt at TIDYBOT_DB)")
	}
	return nil
}

// Model is the model client's configuration; log hears what the
// client learns about the server.
func (cfg Config) Model(log *slog.Logger) openai.Config {
	return openai.Config{APIKey: cfg.OpenAIKey, BaseURL: cfg.OpenAIBaseURL, Model: cfg.OpenAIModel, API: cfg.OpenAIAPI,
		ReasoningEffort: cfg.Effort, ReasoningModel: cfg.ReasoningModel, Logger: log}
}

// ModelTiers are TIDYBOT_MODELS's tiers (nil when unset or invalid:
// Validate reports it).
func (cfg Config) ModelTiers() []agent.ModelTier {
	tiers, _ := agent.ParseModelTiers(cfg.Models)
	return tiers
}

// Transcribe is the speech server's configuration: the model API's
// address and key unless TIDYBOT_TRANSCRIBE_URL names another server (then
// only TIDYBOT_TRANSCRIBE_API_KEY is sent to it, never OPENAI_API_KEY).
// An empty Model turns voice notes off.
func (cfg Config) Transcribe(log *slog.Logger) openai.Config {
	tc := openai.Config{BaseURL: cfg.OpenAIBaseURL, APIKey: cfg.OpenAIKey, Model: strings.TrimSpace(cfg.TranscribeModel), Logger: log}
	if cfg.TranscribeURL != "" {
		tc.BaseURL, tc.APIKey = cfg.TranscribeURL, ""
	}
	if cfg.TranscribeKey != "" {
		tc.APIKey = cfg.TranscribeKey
	}
	return tc
}

// PageBase is the address run links start with: TIDYBOT_PUBLIC_URL, else
// serve's own address on this machine (for a tunnel or a local browser).
func (cfg Config) PageBase(addr string) string {
	if cfg.PublicURL != "" {
		return cfg.PublicURL
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
