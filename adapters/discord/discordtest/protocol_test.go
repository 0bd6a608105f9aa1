package discordtest_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
)

// frame is a gateway payload as a raw client reads it.
type frame struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s"`
	T  *string         `json:"t"`
}

func dial(t *testing.T, srv *discordtest.Server, query string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.DefaultDialer.Dial(srv.GatewayURL()+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	return ws
}

func read(t *testing.T, ws *websocket.Conn) frame {
	t.Helper()
	var f frame
	if err := ws.ReadJSON(&f); err != nil {
		t.Fatalf("read: %v", err)
	}
	return f
}

// closeCode reads until the server closes and returns its close code.
func closeCode(t *testing.T, ws *websocket.Conn) int {
	t.Helper()
	for {
		_, _, err := ws.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code
		}
		if err != nil {
			t.Fatalf("read: %v, want a close frame", err)
		}
	}
}

func identify(intents int) map[string]any {
	return map[string]any{"op": 2, "d": map[string]any{"token": "Bot " + discordtest.Token, "intents": intents,
		"properties": map[string]string{"os": "linux", "browser": "test", "device": "test"}}}
}

func TestGatewayProtocol(t *testing.T) {
	srv := discordtest.New(t)
	ws := dial(t, srv, "?v=10&encoding=json")
	hello := read(t, ws)
	var h struct {
		HeartbeatInterval int `json:"heartbeat_interval"`
	}
	_ = json.Unmarshal(hello.D, &h)
	if hello.Op != 10 || h.HeartbeatInterval <= 0 {
		t.Fatalf("HELLO = %+v", hello)
	}
	_ = ws.WriteJSON(identify(1<<9 | 1<<12 | 1<<15))
	ready := read(t, ws)
	var r struct {
		SessionID        string `json:"session_id"`
		ResumeGatewayURL string `json:"resume_gateway_url"`
		User             struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	_ = json.Unmarshal(ready.D, &r)
	if ready.Op != 0 || *ready.T != "READY" || *ready.S != 1 || r.SessionID == "" || r.ResumeGatewayURL == "" || r.User.ID != srv.BotID() {
		t.Fatalf("READY = %+v %+v", ready, r)
	}
	_ = ws.WriteJSON(map[string]any{"op": 1, "d": 1})
	if ack := read(t, ws); ack.Op != 11 {
		t.Errorf("heartbeat answered %+v, want op 11", ack)
	}
	srv.DM("7", "a")
	srv.Say("G", "C", "7", "b")
	for want := int64(2); want <= 3; want++ {
		if f := read(t, ws); f.Op != 0 || *f.T != "MESSAGE_CREATE" || *f.S != want {
			t.Errorf("dispatch %+v, want MESSAGE_CREATE s=%d", f, want)
		}
	}
	_ = ws.WriteJSON(identify(1 << 9))
	if code := closeCode(t, ws); code != 4005 {
		t.Errorf("second IDENTIFY: close %d, want 4005", code)
	}

	// RESUME on a new connection replays what came after seq.
	srv.DM("7", "c")
	ws2 := dial(t, srv, "?v=9&encoding=json")
	read(t, ws2)
	_ = ws2.WriteJSON(map[string]any{"op": 6, "d": map[string]any{"token": discordtest.Token, "session_id": r.SessionID, "seq": 2}})
	var names []string
	for {
		f := read(t, ws2)
		names = append(names, *f.T)
		if *f.T == "RESUMED" {
			break
		}
	}
	if len(names) != 3 || names[0] != "MESSAGE_CREATE" || names[1] != "MESSAGE_CREATE" {
		t.Errorf("after RESUME: %v, want two MESSAGE_CREATE then RESUMED", names)
	}

	cases := []struct {
		name, query string
		send        any
		code        int
	}{
		{"before identify", "?v=10&encoding=json", map[string]any{"op": 3, "d": map[string]any{"status": "online"}}, 4003},
		{"unknown opcode", "?v=10&encoding=json", map[string]any{"op": 42, "d": nil}, 4001},
		{"undecodable", "?v=10&encoding=json", "not json", 4002},
		{"bad token", "?v=10&encoding=json", map[string]any{"op": 2, "d": map[string]any{"token": "x", "intents": 0}}, 4004},
		{"unknown intent", "?v=10&encoding=json", identify(1 << 30), 4013},
		{"no intents", "?v=10&encoding=json", map[string]any{"op": 2, "d": map[string]any{"token": discordtest.Token}}, 4013},
		{"resume past the sequence", "?v=10&encoding=json", map[string]any{"op": 6, "d": map[string]any{"token": discordtest.Token, "session_id": r.SessionID, "seq": 999}}, 4007},
		{"old version", "?v=6&encoding=json", nil, 4012},
		{"payload over 4096 bytes", "?v=10&encoding=json", map[string]any{"op": 1, "d": strings.Repeat("x", 4100)}, 4002},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws := dial(t, srv, tc.query)
			read(t, ws)
			if tc.send != nil {
				if s, ok := tc.send.(string); ok {
					_ = ws.WriteMessage(websocket.TextMessage, []byte(s))
				} else {
					_ = ws.WriteJSON(tc.send)
				}
			}
			if code := closeCode(t, ws); code != tc.code {
				t.Errorf("close %d, want %d", code, tc.code)
			}
		})
	}
}

func TestResumeOfAnUnknownSessionIsInvalid(t *testing.T) {
	srv := discordtest.New(t)
	ws := dial(t, srv, "?v=10&encoding=json")
	read(t, ws)
	_ = ws.WriteJSON(map[string]any{"op": 6, "d": map[string]any{"token": discordtest.Token, "session_id": "gone", "seq": 3}})
	f := read(t, ws)
	if f.Op != 9 || string(f.D) != "false" {
		t.Errorf("got %+v, want op 9 d false", f)
	}
	_ = ws.WriteJSON(identify(1 << 12))
	if ready := read(t, ws); ready.T == nil || *ready.T != "READY" {
		t.Errorf("IDENTIFY after op 9: %+v", ready)
	}
}

func TestGatewaySendLimit(t *testing.T) {
	srv := discordtest.New(t)
	ws := dial(t, srv, "?v=10&encoding=json")
	read(t, ws)
	for range 121 {
		if err := ws.WriteJSON(map[string]any{"op": 1, "d": nil}); err != nil {
			break
		}
	}
	if code := closeCode(t, ws); code != 4008 {
		t.Errorf("close %d after 121 payloads in a minute, want 4008", code)
	}
}
