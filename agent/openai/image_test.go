package openai_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

func TestImageInputOnBothTransports(t *testing.T) {
	img := agent.Image{MIME: "image/png", Data: []byte("\x89PNG fake bytes")}
	req := agent.Request{Messages: []agent.Message{
		{Role: agent.RoleSystem, Content: "You manage tasks."},
		{Role: agent.RoleUser, Content: "Add these to Groceries", Images: []agent.Image{img}},
	}, MaxTokens: 100}
	for _, api := range []string{openai.APIChat, openai.APIResponses} {
		t.Run(api, func(t *testing.T) {
			srv := openaitest.New(nil)
			defer srv.Close()
			c := openai.New(openai.Config{BaseURL: srv.URL, Model: "gpt-4.1-mini", API: api}, srv.Client())
			if _, err := c.Complete(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			got, _ := srv.LastRequest()
			user := got.Messages[len(got.Messages)-1]
			want := "data:image/png;base64,iVBORyBmYWtlIGJ5dGVz"
			if user.Content != "Add these to Groceries" || len(user.Images) != 1 || user.Images[0] != want {
				t.Errorf("user message %q with images %q, want the text and %s", user.Content, user.Images, want)
			}
		})
	}
}

func TestModelWithoutVisionIsNamed(t *testing.T) {
	srv := openaitest.New(nil, openaitest.WithoutVision())
	defer srv.Close()
	c := openai.New(openai.Config{BaseURL: srv.URL, Model: "llama3.1", API: openai.APIChat}, srv.Client())
	_, err := c.Complete(t.Context(), agent.Request{Messages: []agent.Message{
		{Role: agent.RoleUser, Content: "what is this?", Images: []agent.Image{{MIME: "image/jpeg", Data: []byte{0xff, 0xd8}}}},
	}, MaxTokens: 100})
	var ae *agent.Error
	if !errors.As(err, &ae) || ae.Code != agent.ErrUnsupported || !strings.Contains(ae.Message, "vision model") {
		t.Errorf("err = %v, want ErrUnsupported telling to pick a vision model", err)
	}
}
