package main

import (
	"context"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/internal/evalcmd"
)

// eval runs the evaluation suite against the configured model (see
// package evalcmd).
func (m *Main) eval(ctx context.Context, cfg Config, args []string) error {
	return evalcmd.Run(ctx, cfg, args, evalcmd.Wiring{Stdout: m.Stdout, Stderr: m.Stderr,
		Validate: func(c Config) error { return validate(c, false) },
		Model:    func(c Config) agent.Model { return newModel(c, m.httpClient()) },
		Engine:   m.engineConfig, Redact: m.redact,
		Runs: func(ctx context.Context) (evalcmd.RunStore, error) {
			st, err := m.runsStore(ctx, cfg)
			if err == nil {
				m.closers = append(m.closers, st.Close)
			}
			return st, err
		}})
}
