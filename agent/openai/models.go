package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tidybot/tidybot/agent"
)

// ModelInfo is what the server says about the configured model.
type ModelInfo struct {
	ID string
	// Known is false when the server could not be asked (it has no
	// GET /models/{id}, or did not answer): nothing is known then.
	Known bool
	// ShutdownDate is the day the model stops being served, as the
	// server's GET /models/{id} gives it (shutdown_date); zero when none
	// is announced.
	ShutdownDate time.Time
	// Replacement is the replacement OpenAI's deprecations page names
	// for the model, or, when Chosen, the one tidybot chose; "" for
	// none.
	Replacement string
	// Chosen says that Replacement is tidybot's choice (chosen), not a
	// name read on the deprecations page.
	Chosen bool
}

// ErrUnknownModel is wrapped by LookUp's error for a model the server
// says does not exist.
var ErrUnknownModel = errors.New("unknown model")

// replacements are the replacements OpenAI's deprecations page
// (https://developers.openai.com/api/docs/deprecations) names, model by
// model, dated snapshots included; the models endpoint gives only the
// date (shutdown_date). A model the page gives no plain replacement for
// is left out, so that nothing is suggested for it: gpt-5-pro and
// o3-pro, whose replacement there is gpt-6.1-sol with reasoning.mode
// pro, which OPENAI_MODEL alone cannot choose.
var replacements = map[string]string{
	// "2026-06-11: GPT-5 and o3 model deprecations", shut down 2026-12-11.
	"gpt-5": "gpt-6.1-sol", "gpt-5-2025-08-07": "gpt-6.1-sol",
	"gpt-5-mini": "gpt-6.1-terra", "gpt-5-mini-2025-08-07": "gpt-6.1-terra",
	"gpt-5-nano": "gpt-6-luna", "gpt-5-nano-2025-08-07": "gpt-6-luna",
	"o3": "gpt-6.1-sol", "o3-2025-04-16": "gpt-6.1-sol",
	// "2026-10-14: GPT-4 family", shut down 2027-01-14: GPT-4o
	// (gpt-4o-2024-08-06, gpt-4o-2024-11-20), GPT-4o mini
	// (gpt-4o-mini-2024-07-18), GPT-4.1 (gpt-4.1-2025-04-14), GPT-4.1
	// mini (gpt-4.1-mini-2025-04-14).
	"gpt-4o": "gpt-6-luna", "gpt-4o-2024-08-06": "gpt-6-luna", "gpt-4o-2024-11-20": "gpt-6-luna",
	"gpt-4o-mini": "gpt-6-luna", "gpt-4o-mini-2024-07-18": "gpt-6-luna",
	"gpt-4.1": "gpt-6-luna", "gpt-4.1-2025-04-14": "gpt-6-luna",
	"gpt-4.1-mini": "gpt-6-luna", "gpt-4.1-mini-2025-04-14": "gpt-6-luna",
}

// chosen are replacements tidybot chose where the deprecations page, as
// far as it could be read, names none for a model that has a shutdown
// date: the nearest current model among gpt-6-luna, gpt-6-sol,
// gpt-6-astra and gpt-6.1-sol, by the page's own pattern for the
// generation before (gpt-5 → gpt-6.1-sol, gpt-5-nano → gpt-6-luna).
// docs/models.md says, model by model, what the sources say and why.
// The messages call them a suggestion, never OpenAI's.
var chosen = map[string]string{
	// Shut down 2027-04-01 (the date GET /models gives; third-party
	// trackers copying the page agree). The page's row for them could
	// not be read.
	"gpt-5.1":       "gpt-6.1-sol", // the flagship of its day → today's
	"gpt-5.3-codex": "gpt-6.1-sol", // a Codex variant → the flagship (the page's 2026-04-22 table sent gpt-5-codex to the flagship gpt-5.4)
	"gpt-5.4-nano":  "gpt-6-luna",  // the nano tier → luna (EveryAlt 1.1.1's notes call gpt-6-luna "OpenAI's recommended replacement")
}

// replacementOf is the replacement of model: the page's, else
// tidybot's choice (chosen set).
func replacementOf(model string) (name string, isChosen bool) {
	if r, ok := replacements[model]; ok {
		return r, false
	}
	r, ok := chosen[model]
	return r, ok
}

// LookUp asks the server about the configured model (GET
// /models/{model}). A model the server says does not exist (404
// model_not_found, or 404 from a server whose error names the model) is
// an error wrapping ErrUnknownModel; a rejected key is an error too. A
// server that cannot be reached at all (connection refused, host not
// found) is an error with code agent.ErrUnreachable, naming the setting to
// check, which start-up reports and goes on past. A server that cannot
// answer (no such endpoint, 5xx, a timeout) or an Azure resource (whose
// /models has no deployment names) gives a ModelInfo with Known false and
// no error, so start-up goes on.
//
// go-openai's GetModel decodes into a Model without shutdown_date, so
// this one call is made on net/http: OpenAI documents shutdown_date as
// an optional "YYYY-MM-DD" string (or null) on the List and Retrieve
// model endpoints (deprecations page, "monitor model shutdowns
// programmatically").
func (c *Client) LookUp(ctx context.Context) (ModelInfo, error) {
	info := ModelInfo{ID: c.model}
	if strings.HasSuffix(c.host, ".azure.com") {
		// Azure's /models lists base models, not the deployment names
		// OPENAI_MODEL holds there: a 404 would prove nothing.
		return info, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.BaseURL+"/models/"+url.PathEscape(c.model), nil)
	if err != nil {
		return info, fmt.Errorf("openai: look up model %s: %w", c.model, err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if e := c.unreached(err); e != nil {
			return info, fmt.Errorf("openai: look up model %s: %w", c.model, e)
		}
		c.log.WarnContext(ctx, "openai: could not look the model up", slog.String("error", c.redact(err.Error())))
		return info, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var e struct {
		Error *struct {
			Message string `json:"message"`
			Code    any    `json:"code"`
			Param   any    `json:"param"`
		} `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusUnauthorized:
		return info, fmt.Errorf("openai: look up model %s: %w", c.model,
			&agent.Error{Code: agent.ErrUnauthorized, Message: "the model API at " + c.host + " rejected the key: check OPENAI_API_KEY"})
	case resp.StatusCode == http.StatusNotFound && e.Error != nil &&
		(fmt.Sprint(e.Error.Code) == "model_not_found" || strings.Contains(e.Error.Message, c.model)):
		return info, fmt.Errorf("openai: OPENAI_MODEL=%s: the model API at %s has no such model: %w", c.model, c.host, ErrUnknownModel)
	default:
		c.log.DebugContext(ctx, "openai: the server cannot say whether the model exists", slog.String("status", resp.Status))
		return info, nil
	}
	var m struct {
		ID           string  `json:"id"`
		ShutdownDate *string `json:"shutdown_date"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return info, nil
	}
	info.Known = true
	if m.ShutdownDate != nil && *m.ShutdownDate != "" {
		if d, err := time.Parse(time.DateOnly, *m.ShutdownDate); err == nil {
			info.ShutdownDate = d
			info.Replacement, info.Chosen = replacementOf(c.model)
		}
	}
	return info, nil
}
