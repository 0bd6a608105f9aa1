package checkup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/todoist"
	"github.com/tidybot/tidybot/internal/config"
)

// startupWait bounds each service's check at start-up.
const startupWait = 15 * time.Second

// StartTodoist asks Todoist who the token belongs to (GET /user) before
// chat or serve starts: a rejected token stops start-up with one line
// naming TODOIST_TOKEN; a Todoist that cannot be reached, or does not
// answer, is a warning (a laptop may start offline).
func StartTodoist(ctx context.Context, tasks *todoist.Client, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, startupWait)
	defer cancel()
	_, err := tasks.User(ctx)
	switch agent.ErrorCodeOf(err) {
	case "":
		if err != nil {
			log.Warn("could not check the Todoist token at start-up; starting anyway", slog.String("error", err.Error()))
		}
		return nil
	case agent.ErrUnauthorized:
		return err
	case agent.ErrUnreachable:
		log.Warn(unreachableWarning(err))
		return nil
	}
	log.Warn("could not check the Todoist token at start-up; starting anyway", slog.String("error", agent.ErrorMessageOf(err)))
	return nil
}

// unreachableWarning is the start-up line for a service that cannot be
// reached: its error's message (the service and the setting to check).
func unreachableWarning(err error) string {
	return agent.ErrorMessageOf(err) + "; starting anyway: messages will fail until it can be reached"
}

// StartModel stops start-up, with one line naming the setting, when the
// model cannot work: go-openai would refuse every call, or the server
// says the model does not exist. A model with a shutdown date is logged
// and returned as a notice for each conversation.
func StartModel(ctx context.Context, model *openai.Client, cfg config.Config, log *slog.Logger) (string, error) {
	if err := model.Check(cfg.Protocol == "tools"); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, startupWait)
	defer cancel()
	info, err := model.LookUp(ctx)
	if err != nil {
		if errors.Is(err, openai.ErrUnknownModel) {
			return "", unknownModel(cfg)
		}
		if agent.ErrorCodeOf(err) != agent.ErrUnreachable {
			return "", err
		}
		// Not fatal: a laptop may start offline.
		log.Warn(unreachableWarning(err))
	}
	log.Info("model", slog.String("model", cfg.OpenAIModel), slog.String("api", model.API()), slog.String("reasoning_effort", model.Effort()))
	if e := model.Effort(); cfg.Temperature != 0 && e != "" && e != "none" {
		log.Warn("TIDYBOT_TEMPERATURE is not sent while the model reasons: set TIDYBOT_REASONING_EFFORT=none to use it",
			slog.String("model", cfg.OpenAIModel), slog.String("reasoning_effort", e))
	}
	if info.ShutdownDate.IsZero() {
		return "", nil
	}
	notice := fmt.Sprintf("⚠️ The model %s shuts down on %s (the shutdown_date the model API gives for it)", cfg.OpenAIModel, info.ShutdownDate.Format("2 January 2006"))
	switch {
	case info.Chosen:
		notice += "; OpenAI's deprecations page names no replacement tidybot could confirm: the nearest current model is " + info.Replacement
	case info.Replacement != "":
		notice += "; OpenAI's deprecations page names " + info.Replacement + " as its replacement"
	}
	notice += ": set OPENAI_MODEL to a model that will still be served."
	log.Warn("the model has a shutdown date", slog.String("model", cfg.OpenAIModel), slog.String("shutdown_date", info.ShutdownDate.Format(time.DateOnly)),
		slog.String("replacement", info.Replacement))
	return notice, nil
}

// unknownModel is the error for an OPENAI_MODEL the server says it does
// not serve.
func unknownModel(cfg config.Config) error {
	return fmt.Errorf("OPENAI_MODEL=%s does not exist at %s: choose a model it serves (default %s)", cfg.OpenAIModel, cfg.OpenAIBaseURL, openai.DefaultModel)
}
