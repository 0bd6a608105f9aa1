package slacktest

import (
	"encoding/json"
	"net/url"
	"strings"
)

// streamMarkdown is the markdown a chat.startStream, chat.appendStream or
// chat.stopStream call adds to its message: markdown_text, then the text
// of each markdown_text chunk in chunks, in order. chunks is "Array of
// streaming chunks" on all three pages, each chunk an object with a
// type: markdown_text ({"type":"markdown_text","text":…}), task_update,
// plan_update or blocks (docs.slack.dev/reference/methods/chat.appendStream,
// "Using the chunks parameter"); @slack/web-api 8's chatStream helper
// sends its text only as chunks (packages/web-api/src/chat-stream.ts).
// The other chunk types add no text here. A chunks value that is not such
// an array, or a markdown_text chunk without its text, is invalid_chunks
// ("Chunks submitted with this message are not valid", the methods'
// errors tables): ok is false.
func streamMarkdown(f url.Values) (text string, ok bool) {
	text = f.Get("markdown_text")
	raw := f.Get("chunks")
	if raw == "" {
		return text, true
	}
	var chunks []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal([]byte(raw), &chunks); err != nil {
		return "", false
	}
	var b strings.Builder
	b.WriteString(text)
	for _, c := range chunks {
		switch c.Type {
		case "markdown_text":
			if c.Text == nil {
				return "", false
			}
			b.WriteString(*c.Text)
		case "task_update", "plan_update", "blocks":
		default:
			return "", false
		}
	}
	return b.String(), true
}
