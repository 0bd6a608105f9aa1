package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/internal/checkup"
)

// check checks every configured part (settings, model, Todoist, Slack,
// Telegram, Discord, database, team mode), one line each, and fails unless all
// pass (a warning passes).
func (m *Main) check(ctx context.Context, cfg Config) error {
	hc := m.httpClient()
	model := openai.New(cfg.Model(slog.New(slog.DiscardHandler)), hc)
	findings := []checkup.Finding{checkup.Settings(cfg, validate), checkup.Model(ctx, cfg, model),
		checkup.Todoist(ctx, cfg, todoist.New(cfg.TodoistToken, cfg.TodoistURL, hc, m.todoistBackoff()))}
	if cfg.SlackBotToken != "" {
		findings = append(findings, checkup.Slack(ctx, cfg, hc))
	}
	if cfg.TelegramToken != "" {
		findings = append(findings, checkup.Telegram(cfg, hc))
	}
	if cfg.DiscordToken != "" {
		findings = append(findings, checkup.Discord(ctx, cfg, hc))
	}
	findings = append(findings, checkup.Database(ctx, cfg))
	if cfg.TeamMode() {
		findings = append(findings, checkup.Team(cfg))
	}
	bad := 0
	for _, f := range findings {
		if f.Verdict == checkup.Failed {
			bad++
		}
		text := strings.ReplaceAll(m.redact.String(f.Text), "\n", "\n               ")
		if _, err := fmt.Fprintf(m.Stdout, "%-4s %-9s %s\n", f.Verdict, f.Part, text); err != nil {
			return err
		}
	}
	if bad > 0 {
		return fmt.Errorf("check: %d of %d parts failed", bad, len(findings))
	}
	return nil
}
