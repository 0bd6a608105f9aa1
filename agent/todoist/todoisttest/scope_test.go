package todoisttest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestScopesPerCommand(t *testing.T) {
	svc := NewService(t)
	acct := svc.NewAccount()
	acct.SeedInbox(2, 0)
	do := func(tok, method, path, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, svc.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return resp.StatusCode, m
	}
	inbox := acct.Snapshot().Projects[0].ID
	task := acct.Snapshot().Tasks[0].ID
	cmds := `{"commands":[{"type":"project_add","uuid":"P-u1","temp_id":"t1","args":{"name":"Garden"}},` +
		`{"type":"item_delete","uuid":"P-u2","args":{"id":"` + task + `"}},` +
		`{"type":"project_delete","uuid":"P-u3","args":{"id":"` + inbox + `x"}}]}`
	tests := []struct {
		name   string
		scopes []string
		get    int
		status map[string]string // uuid → "ok" or the error tag
	}{
		{"team mode's old scopes", []string{"data:read_write", "data:delete"}, 200,
			map[string]string{"u1": "ok", "u2": "ok", "u3": "AUTH_INSUFFICIENT_TOKEN_SCOPE"}},
		{"read only", []string{"data:read"}, 200,
			map[string]string{"u1": "AUTH_INSUFFICIENT_TOKEN_SCOPE", "u2": "AUTH_INSUFFICIENT_TOKEN_SCOPE", "u3": "AUTH_INSUFFICIENT_TOKEN_SCOPE"}},
		{"add only", []string{"task:add"}, 403,
			map[string]string{"u1": "AUTH_INSUFFICIENT_TOKEN_SCOPE", "u2": "AUTH_INSUFFICIENT_TOKEN_SCOPE", "u3": "AUTH_INSUFFICIENT_TOKEN_SCOPE"}},
		{"with project:delete", []string{"data:read_write", "data:delete", "project:delete"}, 200,
			map[string]string{"u1": "ok", "u3": "PROJECT_NOT_FOUND"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := acct.Grant(tt.scopes...)
			if status, body := do(tok, http.MethodGet, "/projects", ""); status != tt.get {
				t.Errorf("GET /projects: %d %v, want %d", status, body, tt.get)
			} else if status == 403 && (body["error_tag"] != "AUTH_INSUFFICIENT_TOKEN_SCOPE" || body["http_code"] != float64(403)) {
				t.Errorf("GET /projects: %v, want Todoist's scope error", body)
			}
			status, body := do(tok, http.MethodPost, "/sync", strings.ReplaceAll(cmds, "P-", tt.name[:3]))
			if status != 200 {
				t.Fatalf("sync: %d %v", status, body)
			}
			got := body["sync_status"].(map[string]any)
			for uuid, want := range tt.status {
				st := got[tt.name[:3]+uuid]
				if m, ok := st.(map[string]any); ok {
					st = m["error_tag"]
				}
				if st != want {
					t.Errorf("%s: %v, want %s", uuid, got[tt.name[:3]+uuid], want)
				}
			}
		})
	}
}
