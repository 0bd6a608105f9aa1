package main

import (
	"os"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/internal/config"
)

func TestModelSettings(t *testing.T) {
	for _, k := range []string{"TIDYBOT_MAX_TOKENS", "OPENAI_MODEL", "OPENAI_API", "TIDYBOT_REASONING_EFFORT"} {
		t.Setenv(k, "") // restored after the test
		_ = os.Unsetenv(k)
	}
	c, err := config.Load()
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxTokens != agent.DefaultMaxTokens || c.OpenAIModel != "gpt-6-luna" || c.OpenAIAPI != "auto" || c.Effort != "" {
		t.Errorf("defaults: max tokens %d (want agent.DefaultMaxTokens %d), model %s, api %s, effort %q", c.MaxTokens, agent.DefaultMaxTokens, c.OpenAIModel, c.OpenAIAPI, c.Effort)
	}
	c.OpenAIKey, c.TodoistToken = "sk-test", "t"
	for _, tt := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.OpenAIAPI = "completions" }, "OPENAI_API must be auto, chat or responses"},
		{func(c *Config) { c.Effort = "extreme" }, "TIDYBOT_REASONING_EFFORT must be one of none, minimal, low, medium, high, xhigh, max"},
	} {
		bad := c
		tt.edit(&bad)
		if err := validate(bad, false); err == nil || !strings.Contains(err.Error(), tt.want) || strings.Count(err.Error(), "\n") != 0 {
			t.Errorf("err = %v, want one line with %q", err, tt.want)
		}
	}
}
