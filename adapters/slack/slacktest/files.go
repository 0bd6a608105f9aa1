package slacktest

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// File is a file a person shares in a message.
type File struct {
	Name     string
	Mimetype string
	Filetype string
	Data     []byte
	// DurationMs is an audio clip's length.
	DurationMs int
	// Width and Height are an image's size (original_w, original_h).
	Width, Height int

	id  string
	url string
}

// shared is a stored file and its downloads.
type shared struct {
	f     File
	gets  int
	noAut int // requests without the bot token
}

// AddFile stores f and returns it as shared in a message (with its id
// and url_private_download set): put it in Message.Files.
func (s *Server) AddFile(f File) File {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files == nil {
		s.files = map[string]*shared{}
	}
	f.id = fmt.Sprintf("F%06d", len(s.files)+1)
	f.url = s.srv.URL + "/files-pri/T1-" + f.id + "/download/" + url.PathEscape(f.Name)
	s.files[f.id] = &shared{f: f}
	return f
}

// Downloads returns how many times f was downloaded with the bot token.
func (s *Server) Downloads(f File) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.files[f.id]; sh != nil {
		return sh.gets
	}
	return 0
}

// URL returns f's url_private_download.
func (f File) URL() string { return f.url }

func (f File) event() map[string]any {
	m := map[string]any{"id": f.id, "name": f.Name, "title": f.Name, "mimetype": f.Mimetype, "filetype": f.Filetype,
		"size": len(f.Data), "mode": "hosted", "url_private": strings.Replace(f.url, "/download/", "/", 1), "url_private_download": f.url}
	if f.DurationMs > 0 {
		m["duration_ms"] = f.DurationMs
		m["subtype"] = "slack_audio"
	}
	if f.Width > 0 {
		m["original_w"], m["original_h"] = f.Width, f.Height
	}
	return m
}

// serveFile serves GET /files-pri/<team>-<file id>/download/<name>, a
// file's url_private_download. Slack serves a private file only to a
// request with a token that can read it in the Authorization header
// (docs.slack.dev/messaging/working-with-files: "include your token in an
// Authorization header"; the app needs files:read); without one,
// files.slack.com redirects to the workspace's sign-in page with redir
// set to the file's path (as slack-go's misc.go downloadFile expects).
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	key, _, _ := strings.Cut(rest, "/")
	_, id, _ := strings.Cut(key, "-")
	s.mu.Lock()
	sh := s.files[id]
	authorized := r.Header.Get("Authorization") == "Bearer "+Token
	if sh != nil {
		if authorized {
			sh.gets++
		} else {
			sh.noAut++
		}
	}
	s.mu.Unlock()
	if sh == nil {
		http.NotFound(w, r)
		return
	}
	if !authorized {
		http.Redirect(w, r, "/signin?redir="+url.QueryEscape(r.URL.Path), http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", sh.f.Mimetype)
	_, _ = w.Write(sh.f.Data)
}

// serveSignIn is the workspace's sign-in page.
func serveSignIn(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/html")
	_, _ = w.Write([]byte("<html><body>Sign in to your workspace</body></html>"))
}
