package slacktest

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Streamed messages (docs.slack.dev/reference/methods/chat.startStream,
// chat.appendStream, chat.stopStream): a message the bot starts with
// chat.startStream, appends markdown_text to with chat.appendStream and
// finalizes with chat.stopStream (more markdown_text, blocks "rendered
// at the bottom of the finalized message", metadata). Rules the fake
// enforces:
//   - markdown_text is at most 12,000 characters in each call ("Limit
//     this field to 12,000 characters", all three pages): msg_too_long;
//   - recipient_user_id and recipient_team_id are "Required when
//     streaming to channels" (chat.startStream): outside a D… channel
//     their absence is missing_recipient_user_id or
//     missing_recipient_team_id, the page's errors table's codes for
//     them; recipient_team_id is the team of the person receiving the
//     stream (the page: "The encoded ID of the team the user receiving
//     the streaming text belongs to"), the sender's own team in Slack
//     Connect and Enterprise Grid, not the app's workspace;
//   - the bot must be in the channel (not_in_channel), the channel must
//     be given (channel_not_found);
//   - appendStream and stopStream need the ts of a stream
//     (message_not_found), still streaming: once stopped, a stream
//     answers message_not_in_streaming_state ("The message is not in a
//     streaming state", the errors tables of chat.appendStream and
//     chat.stopStream);
//   - stopStream's blocks and metadata are checked as chat.postMessage's
//     are (invalid_blocks, invalid_metadata_format);
//   - thread_ts is required in a DM (D…); in a channel it is optional
//     (a top-level stream: the page lists thread_ts among the optional
//     arguments, "Provide another message's ts value to reply to"). In
//     DMs: chat.startStream's page says "Streamed
//     messages should always be replies to a user request", the official
//     Node SDK's ChatStartStreamArguments makes thread_ts a required
//     field (packages/web-api/src/types/request/chat.ts), as the API
//     began to require it (slackapi/node-slack-sdk#2382: "all DMs and
//     in-channel conversations with your bot will now have responses
//     replied in-thread"); Slack answers its absence invalid_arguments
//     (vercel/chat#268).
//
// RefuseStreams makes every stream method answer a code (an older or
// restricted workspace: unknown_method, as Slack answers a method it
// does not offer); FailNext makes the next call of one method fail.
// Rate limits: startStream and stopStream are Tier 2, appendStream Tier
// 4 (the pages' Facts), enforced in limits.go; RateLimit applies to them
// as to any method.

// Stream is what the fake knows of a streamed message.
type Stream struct {
	Channel, TS string
	// Open until chat.stopStream. Slack's pages give a stream no
	// lifetime; a stream whose app stopped calling stays open here (on
	// Slack it shows its text so far until stopped, or until a server
	// timeout no page documents: slackapi/python-slack-sdk#1880).
	// Deleted is set once chat.delete removed its message.
	Open, Deleted bool
	// Appends counts chat.appendStream calls; Chunks are the
	// markdown_text of every call, start and stop included, in order.
	Appends int
	Chunks  []string
	// RecipientUser and RecipientTeam are startStream's.
	RecipientUser, RecipientTeam string
	// Started is when chat.startStream was answered.
	Started time.Time
}

type streaming struct {
	byKey  map[string]*streamed // by channel and ts
	order  []*streamed
	refuse string
	next   map[string]string // method → the error of its next call
}

type streamed struct {
	Stream
	post *Posted
}

// RefuseStreams makes chat.startStream, chat.appendStream and
// chat.stopStream answer code.
func (s *Server) RefuseStreams(code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.streams.refuse = code
}

// FailNext makes the next call of method answer code.
func (s *Server) FailNext(method, code string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams.next == nil {
		s.streams.next = map[string]string{}
	}
	s.streams.next[method] = code
}

// Streams returns the streamed messages of channel, oldest first.
func (s *Server) Streams(channel string) []Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Stream
	for _, st := range s.streams.order {
		if st.Channel == channel {
			c := st.Stream
			c.Chunks = append([]string(nil), st.Chunks...)
			out = append(out, c)
		}
	}
	return out
}

// serveStream answers the stream methods; false for any other method.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, method, tok string) bool {
	switch method {
	case "chat.startStream", "chat.appendStream", "chat.stopStream":
	default:
		return false
	}
	f := r.Form
	s.mu.Lock()
	code := s.streams.refuse
	if c, ok := s.streams.next[method]; ok && code == "" {
		code = c
		delete(s.streams.next, method)
	}
	s.mu.Unlock()
	ch := f.Get("channel")
	text, chunked := streamMarkdown(f)
	f.Set("markdown_text", text) // chunks' text too, for the handlers below
	switch {
	case code != "":
	case !chunked:
		code = "invalid_chunks"
	case ch == "":
		code = "channel_not_found"
	case !s.member(ch):
		code = "not_in_channel"
	case len([]rune(text)) > 12000:
		code = "msg_too_long"
	}
	if code != "" {
		s.fail(w, code, tok)
		return true
	}
	switch method {
	case "chat.startStream":
		s.startStream(w, f, tok)
	default:
		s.continueStream(w, f, tok, method == "chat.stopStream")
	}
	return true
}

func (s *Server) startStream(w http.ResponseWriter, f url.Values, tok string) {
	ch := f.Get("channel")
	dm := strings.HasPrefix(ch, "D")
	code := ""
	switch {
	case dm && f.Get("thread_ts") == "":
		code = "invalid_arguments"
	case !dm && f.Get("recipient_user_id") == "":
		code = "missing_recipient_user_id"
	case !dm && f.Get("recipient_team_id") == "":
		code = "missing_recipient_team_id"
	}
	if code != "" {
		s.fail(w, code, tok)
		return
	}
	post := url.Values{"channel": {ch}, "text": {f.Get("markdown_text")}}
	if f.Get("thread_ts") != "" {
		post.Set("thread_ts", f.Get("thread_ts"))
	}
	p, ok := s.keep(w, post, tok, false)
	if !ok {
		return
	}
	s.mu.Lock()
	st := &streamed{Stream: Stream{Channel: ch, TS: p.TS, Open: true, Chunks: []string{f.Get("markdown_text")},
		RecipientUser: f.Get("recipient_user_id"), RecipientTeam: f.Get("recipient_team_id"), Started: time.Now()}, post: p}
	if s.streams.byKey == nil {
		s.streams.byKey = map[string]*streamed{}
	}
	s.streams.byKey[ch+" "+p.TS] = st
	s.streams.order = append(s.streams.order, st)
	s.mu.Unlock()
	answer(w, map[string]any{"ok": true, "channel": ch, "ts": p.TS})
}

func (s *Server) continueStream(w http.ResponseWriter, f url.Values, tok string, stop bool) {
	ch, ts, text := f.Get("channel"), f.Get("ts"), f.Get("markdown_text")
	var meta *Metadata
	if stop {
		var ok bool
		if meta, ok = readMetadata(f.Get("metadata")); !ok {
			s.fail(w, "invalid_metadata_format", tok)
			return
		}
	}
	bs, ok := readShown(f.Get("blocks"))
	if !ok {
		s.fail(w, "invalid_blocks", tok)
		return
	}
	s.mu.Lock()
	st := s.streams.byKey[ch+" "+ts]
	switch {
	case st == nil:
		s.mu.Unlock()
		s.fail(w, "message_not_found", tok)
		return
	case !st.Open:
		s.mu.Unlock()
		s.fail(w, "message_not_in_streaming_state", tok)
		return
	}
	st.Chunks = append(st.Chunks, text)
	st.post.Text += text
	if stop {
		st.Open = false
		st.post.Metadata = meta
		if f.Has("blocks") {
			st.post.buttons(bs) // "rendered at the bottom": the streamed text stays
		}
	} else {
		st.Appends++
	}
	msg := map[string]any{"type": "message", "ts": ts, "text": st.post.Text, "bot_id": BotID, "user": BotUserID}
	s.mu.Unlock()
	out := map[string]any{"ok": true, "channel": ch, "ts": ts}
	if stop {
		out["message"] = msg
	}
	answer(w, out)
}
