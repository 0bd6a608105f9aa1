package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"

	"github.com/tidybot/tidybot/adapters/slack"
)

// slackManifest prints the Slack app manifest for this build: Socket
// Mode, or with --http URL the Events API at URL. It reads no setting.
func (m *Main) slackManifest(args []string) error {
	fs := flag.NewFlagSet("tidybot slack-manifest", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	httpURL := fs.String("http", "", "the public HTTPS address of tidybot serve (Events API); Socket Mode when empty")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return m.help("slack-manifest")
		}
		return fmt.Errorf("slack-manifest: %w (try tidybot slack-manifest -h)", err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("slack-manifest: unexpected argument %q (try tidybot slack-manifest -h)", fs.Arg(0))
	}
	if *httpURL != "" {
		u, err := url.Parse(*httpURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("slack-manifest: --http wants the https address Slack reaches tidybot serve at (https://host[/path]), not %q", *httpURL)
		}
	}
	return slack.Manifest(m.Stdout, *httpURL)
}
