package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/tidybot/tidybot/inspector"
	"github.com/tidybot/tidybot/internal/config"
	"github.com/tidybot/tidybot/internal/evalcmd"
	"github.com/tidybot/tidybot/internal/migratecmd"
)

// subcommands are tidybot's subcommands, each with the usage that
// `tidybot <name> -h` prints before any setting is read.
var subcommands = map[string]func(w io.Writer) error{
	"chat": text(`Usage: tidybot chat

Talk to the bot in this terminal: one message per line, /help for the
commands, Ctrl-D to leave. When stdin is not a terminal
(echo /tidy-inbox | tidybot chat) the next line is read only once the bot
is idle or waiting for you, and chat exits at the end of input once the
last run has ended.

Needs TODOIST_TOKEN and a model (OPENAI_API_KEY, or OPENAI_BASE_URL for a
local server); tidybot -h lists every setting.
`),
	"serve": text(`Usage: tidybot serve

Runs every platform whose token is set (TELEGRAM_BOT_TOKEN; SLACK_BOT_TOKEN
with SLACK_APP_TOKEN for Socket Mode or SLACK_SIGNING_SECRET for the Events
API), the HTTP server on TIDYBOT_HTTP_ADDR (webhooks, /healthz, run pages,
the OAuth callback) and /metrics on TIDYBOT_METRICS_ADDR. With no platform
token it refuses to start, unless TIDYBOT_HTTP_ONLY=true asks for the HTTP
routes alone. SIGINT or SIGTERM stops it; interrupted runs resume at the
next start.

tidybot -h lists every setting.
`),
	"health": text(`Usage: tidybot health

Exits 0 when the local serve answers /healthz on TIDYBOT_HTTP_ADDR, else 1
with one line saying why (for container health checks).
`),
	"eval": func(w io.Writer) error {
		fs, _ := evalcmd.Flags(w)
		fs.Usage()
		return nil
	},
	"runs": text(inspector.TextUsage),
	"check": text(`Usage: tidybot check

Checks each configured part and prints one line for each, with what to do
about a failure: the settings; the model (reachable, OPENAI_MODEL served,
no shutdown date); Todoist (token, account, time zone); Slack (auth.test,
scopes granted against those the app needs, Socket Mode); Telegram (getMe,
the webhook, privacy mode); the database (TIDYBOT_DATABASE_URL: connects,
schema version, migrations pending; else TIDYBOT_DB: size, schema version);
team mode (the redirect URL). Exits 0 only if all pass (a warning passes).
`),
	"migrate": text(migratecmd.Usage),
	"slack-manifest": text(`Usage: tidybot slack-manifest [--http URL]

Prints the Slack app manifest for this build of tidybot: its slash
commands, scopes and events exactly as the code uses them. Socket Mode by
default (no public address); with --http URL, the Events API with its
request URLs under URL, the public HTTPS address of tidybot serve.
deploy/slack-manifest.yaml and deploy/slack-manifest-http.yaml are its
output.
`),
	"version": text("Usage: tidybot version (or tidybot --version)\n\nPrints the version.\n"),
}

func text(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// checkArgs reports a mistake in the arguments of subcommand cmd before
// any setting is read.
func checkArgs(cmd string, args []string) error {
	switch cmd {
	case "chat", "serve", "health", "check":
		if len(args) > 0 {
			return fmt.Errorf("%s: unexpected argument %q (try tidybot %s -h)", cmd, args[0], cmd)
		}
	case "eval":
		fs, _ := evalcmd.Flags(io.Discard)
		if err := fs.Parse(args); err != nil {
			return fmt.Errorf("eval: %w (try tidybot eval -h)", err)
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("eval: unexpected argument %q (try tidybot eval -h)", fs.Arg(0))
		}
	case "runs":
		_, err := inspector.TextPath(args)
		return err
	case "migrate":
		_, err := migratecmd.Parse(args)
		return err
	}
	return nil
}

// helpArg says whether args ask for help.
func helpArg(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return a == "-h" || a == "-help" || a == "--help" })
}

// help prints the usage of subcommand cmd, or everything for "".
func (m *Main) help(cmd string) error {
	if cmd == "" {
		if _, err := io.WriteString(m.Stdout, usageText); err != nil {
			return err
		}
		return config.Usage(m.Stdout)
	}
	usage, ok := subcommands[cmd]
	if !ok {
		return fmt.Errorf("unknown command %q (try tidybot -h)", cmd)
	}
	return usage(m.Stdout)
}
