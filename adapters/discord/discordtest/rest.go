package discordtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
)

// apiError is an error body as Discord sends it: a JSON error code, a
// message and, for invalid form bodies, the fields at fault
// (https://discord.com/developers/docs/reference#error-messages).
type apiError struct {
	status  int
	Code    int    `json:"code"`
	Message string `json:"message"`
	Errors  any    `json:"errors,omitempty"`
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

// JSON error codes (https://discord.com/developers/docs/topics/opcodes-and-status-codes#json-json-error-codes).
var (
	errUnauthorized   = &apiError{status: 401, Code: 0, Message: "401: Unauthorized"}
	errNotFound       = &apiError{status: 404, Code: 0, Message: "404: Not Found"}
	errNotAllowed     = &apiError{status: 405, Code: 0, Message: "405: Method Not Allowed"}
	errUnknownChannel = &apiError{status: 404, Code: 10003, Message: "Unknown Channel"}
	errUnknownMessage = &apiError{status: 404, Code: 10008, Message: "Unknown Message"}
	errUnknownWebhook = &apiError{status: 404, Code: 10015, Message: "Unknown Webhook"}
	errUnknownUser    = &apiError{status: 404, Code: 10013, Message: "Unknown User"}
	errUnknownGuild   = &apiError{status: 404, Code: 10004, Message: "Unknown Guild"}
	errUnknownMember  = &apiError{status: 404, Code: 10007, Message: "Unknown Member"}
	errUnknownInter   = &apiError{status: 404, Code: 10062, Message: "Unknown interaction"}
	errMissingAccess  = &apiError{status: 403, Code: 50001, Message: "Missing Access"}
	errEmptyMessage   = &apiError{status: 400, Code: 50006, Message: "Cannot send an empty message"}
	errNotAuthor      = &apiError{status: 403, Code: 50005, Message: "Cannot edit a message authored by another user"}
	errInvalidJSON    = &apiError{status: 400, Code: 50109, Message: "The request body contains invalid JSON."}
	errAcknowledged   = &apiError{status: 400, Code: 40060, Message: "Interaction has already been acknowledged."}
	errWebhookToken   = &apiError{status: 401, Code: 50027, Message: "Invalid Webhook Token"}
	errThreadExists   = &apiError{status: 400, Code: 160004, Message: "A thread has already been created for this message"}
	errCannotDMSelf   = &apiError{status: 400, Code: 50007, Message: "Cannot send messages to this user"}
)

// formError is 50035 Invalid Form Body with one field's error, nested
// as Discord nests them: {"errors": {"content": {"_errors": [{"code":
// "BASE_TYPE_MAX_LENGTH", "message": "Must be 2000 or fewer in length."}]}}}
// (https://discord.com/developers/docs/reference#error-messages, the
// "Array Error" and "Object Error" examples).
func formError(path []string, code, msg string) *apiError {
	var errs any = map[string]any{"_errors": []any{map[string]string{"code": code, "message": msg}}}
	for i := len(path) - 1; i >= 0; i-- {
		errs = map[string]any{path[i]: errs}
	}
	return &apiError{status: 400, Code: 50035, Message: "Invalid Form Body", Errors: errs}
}

// call is one REST request, routed.
type call struct {
	r     *http.Request
	route string // "POST /channels/{}/messages"
	path  string // "/channels/123/messages"
	p     map[string]string
	body  []byte
	files []*attachment // uploaded files (multipart)
}

// decode reads the JSON body into v.
func (c *call) decode(v any) *apiError {
	if len(bytes.TrimSpace(c.body)) == 0 {
		c.body = []byte("{}")
	}
	if err := json.Unmarshal(c.body, v); err != nil {
		return errInvalidJSON
	}
	return nil
}

type handler func(s *Server, c *call) (int, any)

type route struct {
	method, pattern string
	h               handler
	// noAuth routes take no bot token: GET /gateway
	// (https://discord.com/developers/docs/events/gateway#get-gateway)
	// and the interaction and webhook-token routes, which the token in
	// their path authenticates
	// (https://discord.com/developers/docs/interactions/receiving-and-responding#endpoints).
	noAuth bool
}

var routes = []route{
	{"GET", "/gateway", (*Server).getGateway, true},
	{"GET", "/gateway/bot", (*Server).getGatewayBot, false},
	{"GET", "/users/@me", (*Server).getMe, false},
	{"POST", "/users/@me/channels", (*Server).createDM, false},
	{"GET", "/users/{user}", (*Server).getUser, false},
	{"GET", "/guilds/{guild}/members/{user}", (*Server).getMember, false},
	{"GET", "/applications/@me", (*Server).getApp, false},
	{"GET", "/oauth2/applications/@me", (*Server).getApp, false},
	{"GET", "/channels/{channel}", (*Server).getChannel, false},
	{"GET", "/channels/{channel}/messages", (*Server).listMessages, false},
	{"POST", "/channels/{channel}/messages", (*Server).createMessage, false},
	{"GET", "/channels/{channel}/messages/{message}", (*Server).getMessage, false},
	{"PATCH", "/channels/{channel}/messages/{message}", (*Server).editMessage, false},
	{"DELETE", "/channels/{channel}/messages/{message}", (*Server).deleteMessage, false},
	{"POST", "/channels/{channel}/messages/{message}/threads", (*Server).startThread, false},
	{"POST", "/channels/{channel}/typing", (*Server).triggerTyping, false},
	{"PUT", "/channels/{channel}/messages/{message}/reactions/{emoji}/@me", (*Server).addReaction, false},
	{"DELETE", "/channels/{channel}/messages/{message}/reactions/{emoji}/@me", (*Server).removeReaction, false},
	{"GET", "/applications/{app}/commands", (*Server).getCommands, false},
	{"PUT", "/applications/{app}/commands", (*Server).putCommands, false},
	{"POST", "/applications/{app}/commands", (*Server).postCommand, false},
	{"GET", "/applications/{app}/guilds/{guild}/commands", (*Server).getCommands, false},
	{"PUT", "/applications/{app}/guilds/{guild}/commands", (*Server).putCommands, false},
	{"POST", "/applications/{app}/guilds/{guild}/commands", (*Server).postCommand, false},
	{"POST", "/interactions/{interaction}/{token}/callback", (*Server).interactionCallback, true},
	{"POST", "/webhooks/{app}/{token}", (*Server).followup, true},
	{"GET", "/webhooks/{app}/{token}/messages/{message}", (*Server).getWebhookMessage, true},
	{"PATCH", "/webhooks/{app}/{token}/messages/{message}", (*Server).editWebhookMessage, true},
	{"DELETE", "/webhooks/{app}/{token}/messages/{message}", (*Server).deleteWebhookMessage, true},
}

// match finds the route of a path; found is whether any route has the
// path (for 405).
func match(method, path string) (rt *route, p map[string]string, found bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := range routes {
		r := &routes[i]
		ps := strings.Split(strings.Trim(r.pattern, "/"), "/")
		if len(ps) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for j, seg := range ps {
			if strings.HasPrefix(seg, "{") {
				if segs[j] == "" {
					ok = false
					break
				}
				params[strings.Trim(seg, "{}")] = segs[j]
			} else if seg != segs[j] {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		found = true
		if r.method == method {
			return r, params, true
		}
	}
	return nil, nil, found
}

// normalizeRoute turns "POST /channels/{id}/messages" into
// "POST /channels/{}/messages": placeholders match whatever they are
// named.
func normalizeRoute(route string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(route, '{')
		if i < 0 {
			b.WriteString(route)
			return b.String()
		}
		j := strings.IndexByte(route[i:], '}')
		if j < 0 {
			b.WriteString(route)
			return b.String()
		}
		b.WriteString(route[:i] + "{}")
		route = route[i+j+1:]
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/gateway" || r.URL.Path == "/gateway/" {
		s.serveGateway(w, r)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/attachments/") {
		s.serveAttachment(w, r)
		return
	}
	// REST lives under /api/v{version}; v9 is discordgo's
	// (discordgo endpoints.go, APIVersion) and v10 the current one
	// (https://discord.com/developers/docs/reference#api-versioning).
	path, ok := strings.CutPrefix(r.URL.Path, "/api/v9")
	if !ok {
		path, ok = strings.CutPrefix(r.URL.Path, "/api/v10")
	}
	if !ok {
		writeJSON(w, nil, 404, errNotFound)
		return
	}
	rt, params, found := match(r.Method, path)
	if rt == nil {
		if found {
			writeJSON(w, nil, 405, errNotAllowed)
		} else {
			writeJSON(w, nil, 404, errNotFound)
		}
		return
	}
	c := &call{r: r, p: params, path: path, route: r.Method + " " + normalizeRoute(rt.pattern)}
	s.mu.Lock()
	s.requests[c.route]++
	s.mu.Unlock()
	// "Bot <token>" is the bot's Authorization header
	// (https://discord.com/developers/docs/reference#authentication);
	// anything else is 401 {"message": "401: Unauthorized", "code": 0}.
	if !rt.noAuth && r.Header.Get("Authorization") != "Bot "+Token {
		writeJSON(w, nil, 401, errUnauthorized)
		return
	}
	if !s.held(c) {
		return // the client gave up waiting (Hold)
	}
	hdr, limited, failed := s.rateLimit(c)
	if limited != nil {
		writeJSON(w, hdr, http.StatusTooManyRequests, limited)
		return
	}
	if failed != nil {
		writeJSON(w, nil, failed.status, failed)
		return
	}
	if err := s.readBody(c); err != nil {
		writeJSON(w, hdr, err.status, err)
		return
	}
	status, out := rt.h(s, c)
	if e, ok := out.(*apiError); ok {
		status = e.status
	}
	writeJSON(w, hdr, status, out)
}

// readBody reads a JSON body, or a multipart one whose JSON is the
// payload_json part and whose files are files[n]
// (https://discord.com/developers/docs/reference#uploading-files).
func (s *Server) readBody(c *call) *apiError {
	ct, params, _ := mime.ParseMediaType(c.r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		b, err := io.ReadAll(io.LimitReader(c.r.Body, 32<<20))
		if err != nil {
			return errInvalidJSON
		}
		c.body = b
		return nil
	}
	mr := multipart.NewReader(c.r.Body, params["boundary"])
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errInvalidJSON
		}
		b, err := io.ReadAll(part)
		if err != nil {
			return errInvalidJSON
		}
		if part.FormName() == "payload_json" {
			c.body = b
		} else if part.FileName() != "" {
			c.files = append(c.files, &attachment{File: File{Name: part.FileName(), ContentType: part.Header.Get("Content-Type"), Data: b}})
		}
	}
}

func writeJSON(w http.ResponseWriter, hdr http.Header, status int, body any) {
	for k, v := range hdr {
		w.Header()[k] = v
	}
	if status == http.StatusNoContent || body == nil && status != 200 {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

func (s *Server) getGateway(c *call) (int, any) {
	return 200, map[string]any{"url": s.GatewayURL()}
}

// getGatewayBot answers as https://discord.com/developers/docs/events/gateway#get-gateway-bot.
func (s *Server) getGatewayBot(c *call) (int, any) {
	return 200, map[string]any{
		"url": s.GatewayURL(), "shards": 1,
		"session_start_limit": map[string]any{"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1},
	}
}

func (s *Server) getMe(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.userJSONLocked(s.botID)
	out["verified"] = true
	out["mfa_enabled"] = false
	out["flags"] = 0
	return 200, out
}

func (s *Server) getUser(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.users[c.p["user"]]; !ok {
		return 0, errUnknownUser
	}
	return 200, s.userJSONLocked(c.p["user"])
}

// getMember answers a guild member object with its user
// (https://discord.com/developers/docs/resources/guild#get-guild-member),
// 10004 Unknown Guild for a guild the bot is not in and 10007 Unknown
// Member for a person who is not a member; no privileged intent is
// needed (intents concern the gateway only).
func (s *Server) getMember(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.guilds, c.p["guild"]) {
		return 0, errUnknownGuild
	}
	if !s.members[c.p["guild"]][c.p["user"]] {
		return 0, errUnknownMember
	}
	return 200, s.memberJSONLocked(c.p["user"], true)
}

// getApp answers the application object
// (https://discord.com/developers/docs/resources/application#get-current-application).
func (s *Server) getApp(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	flags := 1 << 18 // GATEWAY_MESSAGE_CONTENT_LIMITED
	if !s.messageContent {
		flags = 0
	}
	return 200, map[string]any{
		"id": s.appID, "name": "tidybot", "icon": nil, "description": "", "bot_public": true,
		"bot_require_code_grant": false, "verify_key": fmt.Sprintf("%x", []byte(s.pub)),
		"flags": flags, "bot": s.userJSONLocked(s.botID),
	}
}

// createDM opens (or returns) the DM channel with a person
// (https://discord.com/developers/docs/resources/user#create-dm).
func (s *Server) createDM(c *call) (int, any) {
	var body struct {
		RecipientID string `json:"recipient_id"`
	}
	if err := c.decode(&body); err != nil {
		return 0, err
	}
	if body.RecipientID == "" {
		return 0, formError([]string{"recipient_id"}, "BASE_TYPE_REQUIRED", "This field is required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if body.RecipientID == s.botID {
		return 0, errCannotDMSelf
	}
	return 200, s.channelJSONLocked(s.dmLocked(body.RecipientID))
}

func (s *Server) getChannel(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch, ok := s.channels[c.p["channel"]]
	if !ok {
		return 0, errUnknownChannel
	}
	return 200, s.channelJSONLocked(ch)
}

// triggerTyping shows the typing indicator: 204 No Content
// (https://discord.com/developers/docs/resources/channel#trigger-typing-indicator).
func (s *Server) triggerTyping(c *call) (int, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.channels[c.p["channel"]]; !ok {
		return 0, errUnknownChannel
	}
	s.typing[c.p["channel"]]++
	return 204, nil
}
