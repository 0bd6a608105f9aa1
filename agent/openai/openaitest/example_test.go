package openaitest_test

import (
	"context"
	"fmt"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/agent/openai"
	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

// A scripted model behind the real client: a tool call, a rate limit the
// client waits out, then an answer.
func Example() {
	srv := openaitest.New(openaitest.Replies(
		openaitest.Call("get_overview", `{}`),
		openaitest.RateLimited("0"),
		openaitest.Text("Your inbox is empty."),
	), openaitest.WithAPIKey("sk-test"))
	defer srv.Close()

	model := openai.New(openai.Config{APIKey: "sk-test", BaseURL: srv.URL, Model: "gpt-4.1-mini"}, srv.Client())
	ctx := context.Background()
	req := agent.Request{
		Messages:   []agent.Message{{Role: agent.RoleUser, Content: "what's in my inbox?"}},
		Tools:      []agent.Tool{{Name: "get_overview", Description: "Projects and inbox.", Parameters: []byte(`{"type":"object","properties":{},"additionalProperties":false}`), Strict: true}},
		ToolChoice: "required",
	}
	resp, _ := model.Complete(ctx, req)
	fmt.Println(resp.ToolCalls[0].Name, resp.ToolCalls[0].ID)

	req.Messages = append(req.Messages,
		agent.Message{Role: agent.RoleAssistant, ToolCalls: resp.ToolCalls},
		agent.Message{Role: agent.RoleTool, ToolCallID: resp.ToolCalls[0].ID, Content: "Inbox: no tasks"})
	resp, _ = model.Complete(ctx, req)
	fmt.Println(resp.Content)

	last, _ := srv.LastRequest()
	fmt.Println(srv.Calls(), "calls;", len(last.Messages), "messages; tool_choice", last.ToolChoice, "; temperature", *last.Temperature)
	// Output:
	// get_overview call_1_0
	// Your inbox is empty.
	// 3 calls; 3 messages; tool_choice required ; temperature 0
}
