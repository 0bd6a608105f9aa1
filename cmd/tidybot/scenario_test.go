package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"regexp"
	"strconv"
	"strings"

	"github.com/tidybot/tidybot/agent"
	"github.com/tidybot/tidybot/bot"
	"github.com/tidybot/tidybot/internal/sim"
)

// scenario is the simulated model of the end-to-end tests: it answers
// each request as a function of the conversation, by the user's latest
// instruction:
//   - the /tidy-inbox instruction: the competent tidier (internal/sim);
//   - "file the dentist task": ask which project, then move it there;
//   - "delete the cake task": find it and delete it (a gated write);
//   - "tidy my inbox" (a voice note): as /tidy-inbox;
//   - "move the milk task to groceries": find it and move it there;
//   - "add task X": add the task X, then answer "Added: X" (a write, two
//     model calls: a run a kill can cut between its steps);
//   - "Add these to Groceries" with listPhoto: add listItems there, in one
//     add_tasks call (the scripted model "reads" only that photo);
//   - anything else: a final answer echoing it.
type scenario struct {
	// check makes the tidier read the inbox after its moves, a step
	// after the write (see sim.Tidier.Check).
	check bool
}

// wrote reports whether the run in req has already applied a move.
func wrote(req agent.Request) bool {
	for _, m := range req.Messages {
		if m.Role == agent.RoleTool && strings.Contains(m.Content, "✓ Moved") {
			return true
		}
	}
	return false
}

// taskRe reads a listing line: `- ID "content" …`, or the inbox
// listing's compact `ID content …` (the content quoted where needed).
var taskRe = regexp.MustCompile(`(?m)^(?:- (\S+) ("(?:[^"\\]|\\.)*")|(\S+) (.+)$)`)

func (s *scenario) reply(req agent.Request) agent.Response {
	// The instruction is the last user message; what follows it is this
	// run's steps.
	start := 0
	for i, m := range req.Messages {
		if m.Role == agent.RoleUser && !strings.HasPrefix(m.Content, "Observation: ") && !strings.HasPrefix(m.Content, "Error: ") {
			start = i
		}
	}
	instr := req.Messages[start].Content
	steps := req.Messages[start+1:]
	var assistant int
	var lastTool string
	for _, m := range steps {
		if m.Role == agent.RoleAssistant {
			assistant++
		}
		if m.Role == agent.RoleTool {
			lastTool = m.Content
		}
	}
	call := func(name string, args any) agent.Response {
		b, _ := json.Marshal(args)
		if len(req.Tools) == 0 { // the json protocol
			var act map[string]any
			_ = json.Unmarshal(b, &act)
			act["type"] = name
			env, _ := json.Marshal(map[string]any{"thought": "thinking", "action": act})
			return agent.Response{Content: string(env)}
		}
		return agent.Response{Content: "thinking", ToolCalls: []agent.ToolCall{{ID: fmt.Sprintf("call_%d", len(req.Messages)), Name: name, Arguments: string(b)}}}
	}
	final := func(answer string) agent.Response {
		return call(agent.ActFinalAnswer, map[string]string{"answer": answer})
	}
	findTask := func(word string) string {
		for _, m := range taskRe.FindAllStringSubmatch(lastTool, -1) {
			id, content := m[1], m[2]
			if id == "" {
				id, content = m[3], m[4]
			}
			if c, err := strconv.Unquote(content); err == nil {
				content = c
			}
			if strings.Contains(strings.ToLower(content), word) {
				return id
			}
		}
		return ""
	}
	var images []agent.Image
	if req.Messages[start].Role == agent.RoleUser {
		images = req.Messages[start].Images
	}
	switch {
	case len(images) > 0 && strings.Contains(strings.ToLower(instr), "add these to groceries"):
		if !bytes.Equal(images[0].Data, listPhoto()) {
			return final("I can't read that photo.")
		}
		switch assistant {
		case 0:
			return call(agent.ActGetProjects, map[string]any{})
		case 1:
			var tasks []map[string]string
			for _, it := range listItems {
				tasks = append(tasks, map[string]string{"content": it, "project_id": findTask("groceries")})
			}
			return call(agent.ActAddTasks, map[string]any{"tasks": tasks})
		}
		return final(fmt.Sprintf("Added %d items to Groceries.", len(listItems)))
	case strings.HasPrefix(instr, bot.AutopilotPrefix):
		// Autopilot: grocery tasks go to Groceries, in one reply after
		// the prefetched overview.
		if id := findTask("milk"); id != "" && assistant <= 1 {
			return call(agent.ActMoveTasks, map[string]any{"moves": []map[string]string{{"task_id": id, "project_name": "Groceries"}}})
		}
		return final("none left")
	case instr == bot.TidyInboxInstruction || strings.EqualFold(instr, "tidy my inbox"):
		return (&sim.Tidier{Groups: sim.TalkGroups, Check: s.check}).Reply(agent.Request{Messages: req.Messages[start:], Tools: req.Tools})
	case strings.Contains(instr, "dentist"):
		switch assistant {
		case 0:
			return call(agent.ActAskUser, map[string]any{"question": "Which project should the dentist task go to?", "options": []string{"Health", "Errands"}})
		case 1:
			return call(agent.ActGetInboxTasks, map[string]any{})
		case 2:
			answer := ""
			for _, m := range steps {
				if m.Role == agent.RoleTool && strings.HasPrefix(m.Content, "The user answered: ") {
					answer = strings.TrimPrefix(m.Content, "The user answered: ")
				}
			}
			return call(agent.ActMoveTasks, map[string]any{"moves": []map[string]string{{"task_id": findTask("dentist"), "project_name": answer}}})
		}
		return final("Filed the dentist task.")
	case strings.Contains(instr, "move the milk task"):
		switch assistant {
		case 0:
			return call(agent.ActGetInboxTasks, map[string]any{})
		case 1:
			return call(agent.ActMoveTasks, map[string]any{"moves": []map[string]string{{"task_id": findTask("milk"), "project_name": "Groceries"}}})
		}
		return final("Moved the milk task to Groceries.")
	case strings.Contains(instr, "delete the cake"):
		switch assistant {
		case 0:
			return call(agent.ActGetInboxTasks, map[string]any{})
		case 1:
			return call(agent.ActDeleteTasks, map[string]any{"task_ids": []string{findTask("cake")}})
		}
		if strings.Contains(lastTool, "said no") {
			return final("OK, I kept the cake task.")
		}
		if strings.Contains(lastTool, "did not confirm") {
			return final("I kept the cake task. " + lastTool)
		}
		return final("Deleted the cake task.")
	}
	if content, ok := strings.CutPrefix(instr, "add task "); ok {
		if assistant == 0 {
			return call(agent.ActAddTasks, map[string]any{"tasks": []map[string]string{{"content": content}}})
		}
		return final("Added: " + content)
	}
	if instr == "say a lot" {
		return final(strings.Repeat("blah ", 200_000)) // a runaway 1 MB answer
	}
	return final("You said: " + instr)
}

// listItems are what listPhoto shows.
var listItems = []string{"Milk", "Eggs", "Bread"}

// listPhoto is "a photo of a shopping list": a small PNG (the fake model
// cannot read, so the scenario knows this one).
func listPhoto() []byte {
	im := image.NewRGBA(image.Rect(0, 0, 640, 480))
	for x := 100; x < 540; x++ {
		for _, y := range []int{100, 200, 300} {
			im.Set(x, y, color.Black)
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, im)
	return b.Bytes()
}
