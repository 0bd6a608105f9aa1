package telegramtest

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
)

// call posts a Bot API method with body of contentType and decodes the
// answer's result into out.
func call(t *testing.T, s *Server, method, contentType string, body []byte, out any) {
	t.Helper()
	resp, err := http.Post(s.URL+"/bot"+s.Token+"/"+method, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer struct {
		OK          bool            `json:"ok"`
		Result      json.RawMessage `json:"result"`
		Description string          `json:"description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatal(err)
	}
	if !answer.OK {
		t.Fatalf("%s (%s): %s", method, contentType, answer.Description)
	}
	if out != nil {
		if err := json.Unmarshal(answer.Result, out); err != nil {
			t.Fatal(err)
		}
	}
}

func TestParametersEveryWayTheBotAPITakesThem(t *testing.T) {
	markup := `{"inline_keyboard":[[{"text":"Undo","callback_data":"undo:1"}]]}`
	form := url.Values{"chat_id": {"42"}, "text": {"Added"}, "reply_markup": {markup}}
	var multi bytes.Buffer
	mw := multipart.NewWriter(&multi)
	for k, v := range form {
		_ = mw.WriteField(k, v[0])
	}
	_ = mw.Close()
	bodies := []struct {
		name, contentType string
		body              []byte
	}{
		// grammY, telegraf and python-telegram-bot send JSON, with
		// numbers as numbers and objects as objects.
		{"json", "application/json", []byte(`{"chat_id":42,"text":"Added","reply_markup":` + markup + `}`)},
		{"form", "application/x-www-form-urlencoded", []byte(form.Encode())},
		{"multipart", mw.FormDataContentType(), multi.Bytes()},
	}
	for _, b := range bodies {
		t.Run(b.name, func(t *testing.T) {
			s := New()
			defer s.Close()
			call(t, s, "sendMessage", b.contentType, b.body, nil)
			got := s.Messages(42)
			if len(got) != 1 || got[0].Text != "Added" || !slices.Equal(got[0].Buttons, []string{"undo:1"}) {
				t.Fatalf("sent %+v, want one message \"Added\" with the button undo:1", got)
			}
		})
	}
}

func TestEmptyJSONBodyIsNoParameters(t *testing.T) {
	s := New()
	defer s.Close()
	var me struct {
		Username string `json:"username"`
	}
	call(t, s, "getMe", "application/json", nil, &me)
	if me.Username != BotUserName {
		t.Fatalf("getMe: %+v", me)
	}
}

func TestJSONNullIsAnAbsentParameter(t *testing.T) {
	s := New()
	defer s.Close()
	call(t, s, "sendMessage", "application/json", []byte(`{"chat_id":42,"text":"Hi","reply_markup":null}`), nil)
	if got := s.Messages(42); len(got) != 1 || len(got[0].Buttons) != 0 {
		t.Fatalf("sent %+v", got)
	}
}

func TestGetUpdatesOffsetConfirmsEarlierUpdates(t *testing.T) {
	for _, contentType := range []string{"application/json", "application/x-www-form-urlencoded"} {
		t.Run(contentType, func(t *testing.T) {
			s := New()
			defer s.Close()
			first := s.PushText(42, 7, "one")
			second := s.PushText(42, 7, "two")
			third := s.PushText(42, 7, "three")
			body := func(offset, limit string) []byte {
				if contentType == "application/json" {
					return []byte(`{"offset":` + offset + `,"limit":` + limit + `,"timeout":0}`)
				}
				return []byte(url.Values{"offset": {offset}, "limit": {limit}, "timeout": {"0"}}.Encode())
			}
			ids := func(offset, limit string) []int {
				var ups []struct {
					UpdateID int `json:"update_id"`
				}
				call(t, s, "getUpdates", contentType, body(offset, limit), &ups)
				var out []int
				for _, u := range ups {
					out = append(out, u.UpdateID)
				}
				return out
			}
			if got := ids("0", "100"); !slices.Equal(got, []int{first, second, third}) {
				t.Fatalf("offset 0: %v, want every update", got)
			}
			if got := ids(strconv.Itoa(second), "1"); !slices.Equal(got, []int{second}) {
				t.Fatalf("offset %d limit 1: %v, want [%d]", second, got, second)
			}
			// The first is confirmed now: a later offset-less call no
			// longer returns it.
			if got := ids("0", "100"); !slices.Equal(got, []int{second, third}) {
				t.Fatalf("after confirming %d: %v", first, got)
			}
			if got := ids("-1", "100"); !slices.Equal(got, []int{third}) {
				t.Fatalf("offset -1: %v, want the last update only", got)
			}
			if got := ids(strconv.Itoa(third+1), "100"); len(got) != 0 {
				t.Fatalf("offset past the last: %v, want none", got)
			}
		})
	}
}
