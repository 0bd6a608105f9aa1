package todoisttest

import (
	"context"
	"net/http"
	"strings"
)

// OAuth scopes, what each grants, and what each request needs. The
// scopes are the TypeScript SDK's PERMISSIONS (Doist/todoist-api-typescript
// src/authentication.ts; the Python SDK's get_authentication_url joins
// the same names with commas), described in the SDK's authorization
// guide (doist.github.io/todoist-api-typescript/authorization):
// "task:add - Only create new tasks", "data:read - Read-only access",
// "data:read_write - Read and write access", "data:delete - Full access
// including delete", "project:delete - Can delete projects". Todoist's
// own wording of data:delete names "tasks, labels, and filters"
// (developer.todoist.com/api/v1 #tag/Authorization), which is why a
// project delete needs project:delete of its own.
//
// What a token without the scope gets is the 403 quoted from Todoist in
// Doist/todoist-cli's wrapApiError tests: {"error": "Insufficient Token
// scope", "error_code": 403, "error_extra": {"access_type":
// "access_token"}, "error_tag": "AUTH_INSUFFICIENT_TOKEN_SCOPE",
// "http_code": 403}; on /sync, as the sync_status of each command it
// refuses (a command's error has the same shape as a request's:
// developer.todoist.com/api/v1 #tag/Sync/Overview), the other commands
// of the request going through.

// The abilities a scope grants.
const (
	canRead          = "read"
	canAdd           = "add"
	canWrite         = "write"
	canDelete        = "delete"
	canDeleteProject = "delete_project"
)

var scopeGrants = map[string][]string{
	"task:add":        {canAdd},
	"data:read":       {canRead},
	"data:read_write": {canRead, canAdd, canWrite},
	"data:delete":     {canRead, canAdd, canWrite, canDelete},
	"project:delete":  {canDeleteProject},
	"backups:read":    nil,
	"dev:app_console": nil,
}

// commandNeeds is the ability a /sync command needs: deletes of tasks,
// sections, labels and filters data:delete, a project's project:delete,
// item_add task:add (or more), any other write data:read_write.
func commandNeeds(typ string) string {
	switch typ {
	case "project_delete":
		return canDeleteProject
	case "item_add":
		return canAdd
	}
	if strings.HasSuffix(typ, "_delete") {
		return canDelete
	}
	return canWrite
}

// scopes is what one token may do; nil (a personal API token, or a
// Server used alone) may do anything.
type scopes map[string]bool

func parseScopes(scope string) scopes {
	s := scopes{}
	for _, sc := range strings.Split(scope, ",") {
		for _, a := range scopeGrants[sc] {
			s[a] = true
		}
	}
	return s
}

func (s scopes) allow(ability string) bool { return s == nil || s[ability] }

type scopesKey struct{}

func withScopes(ctx context.Context, s scopes) context.Context {
	return context.WithValue(ctx, scopesKey{}, s)
}

func scopesOf(r *http.Request) scopes {
	s, _ := r.Context().Value(scopesKey{}).(scopes)
	return s
}

// scopeError is Todoist's answer to a request or command the token's
// scopes do not cover. Callers hold s.mu.
func (s *Server) scopeError() *apiError {
	return s.newError(http.StatusForbidden, 403, "AUTH_INSUFFICIENT_TOKEN_SCOPE", "Insufficient Token scope", map[string]any{"access_type": "access_token"})
}
