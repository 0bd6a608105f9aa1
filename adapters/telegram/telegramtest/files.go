package telegramtest

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// maxDownload is the Bot API's download limit: "bots can download files
// of up to 20MB in size" (core.telegram.org/bots/api#getfile).
const maxDownload = 20 << 20

type file struct {
	id   string
	path string
	data []byte
	size int // as reported; len(data) unless set larger
	gets int // downloads
}

// AddFile stores a file people sent and returns its file_id. kind is
// "voice", "audio", "photos" or "documents", the folder Telegram puts it
// in; ext its extension (Telegram stores voice notes as .oga).
func (s *Server) AddFile(kind, ext string, data []byte) string {
	return s.addFile(kind, ext, data, len(data))
}

// AddBigFile stores a file that reports size bytes (getFile refuses one
// over 20 MB, as Telegram does).
func (s *Server) AddBigFile(kind, ext string, size int) string {
	return s.addFile(kind, ext, []byte("big"), size)
}

func (s *Server) addFile(kind, ext string, data []byte, size int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.files) + 1
	id := fmt.Sprintf("AgAD%s%d", kind, n)
	s.files[id] = &file{id: id, path: fmt.Sprintf("%s/file_%d%s", kind, n, ext), data: data, size: size}
	return id
}

// Downloads returns how many times the file was downloaded.
func (s *Server) Downloads(fileID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[fileID]; f != nil {
		return f.gets
	}
	return 0
}

// getFile answers getFile with a File whose file_path the bot downloads
// from /file/bot<token>/<file_path> (core.telegram.org/bots/api#getfile);
// an unknown file_id is "Bad Request: invalid file_id", one over 20 MB
// "Bad Request: file is too big", as the real API answers.
func (s *Server) getFile(w http.ResponseWriter, id string) {
	s.mu.Lock()
	f := s.files[id]
	s.mu.Unlock()
	switch {
	case f == nil:
		fail(w, http.StatusBadRequest, "Bad Request: invalid file_id", 0)
	case f.size > maxDownload:
		fail(w, http.StatusBadRequest, "Bad Request: file is too big", 0)
	default:
		reply(w, map[string]any{"file_id": f.id, "file_unique_id": "u" + f.id, "file_size": f.size, "file_path": f.path})
	}
}

// serveFile serves GET /file/bot<token>/<file_path>.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, rest string) {
	token, p, ok := strings.Cut(rest, "/")
	if r.Method != http.MethodGet || !ok || token != s.Token {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	s.mu.Lock()
	var f *file
	for _, x := range s.files {
		if x.path == p {
			f = x
		}
	}
	if f != nil {
		f.gets++
	}
	s.mu.Unlock()
	if f == nil {
		http.Error(w, "Not Found", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = w.Write(f.data)
}

func (s *Server) pushMedia(chatID, userID int64, caption string, media map[string]any) int {
	s.mu.Lock()
	ok := s.delivered(chatID, caption, false)
	s.mu.Unlock()
	if !ok {
		return 0
	}
	return s.push(func(id int) map[string]any {
		msg := map[string]any{
			"message_id": s.userMessageID(id), "date": time.Now().Unix(),
			"from": map[string]any{"id": userID, "is_bot": false, "first_name": "User"},
			"chat": map[string]any{"id": chatID, "type": chatType(chatID)},
		}
		for k, v := range media {
			msg[k] = v
		}
		if caption != "" {
			msg["caption"] = caption
			if ents := entities(caption); len(ents) > 0 {
				msg["caption_entities"] = ents
			}
		}
		s.userMsgs[msg["message_id"].(int)] = msg
		return map[string]any{"update_id": id, "message": msg}
	})
}

// fileSize returns the size of file fileID, 0 when the fake has no such
// file (a message may name one the bot cannot fetch).
func (s *Server) fileSize(fileID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.files[fileID]; f != nil {
		return f.size
	}
	return 0
}

// PushVoice queues a voice note (core.telegram.org/bots/api#voice) of
// file fileID, seconds long.
func (s *Server) PushVoice(chatID, userID int64, fileID string, seconds int) int {
	size := s.fileSize(fileID)
	return s.pushMedia(chatID, userID, "", map[string]any{"voice": map[string]any{
		"file_id": fileID, "file_unique_id": "u" + fileID, "duration": seconds, "mime_type": "audio/ogg", "file_size": size}})
}

// PhotoSize is one size of a photo.
type PhotoSize struct {
	FileID        string
	Width, Height int
}

// PushPhoto queues a photo with a caption: sizes as Telegram sends them,
// smallest first (core.telegram.org/bots/api#photosize).
func (s *Server) PushPhoto(chatID, userID int64, caption string, sizes ...PhotoSize) int {
	var ps []map[string]any
	for _, p := range sizes {
		ps = append(ps, map[string]any{"file_id": p.FileID, "file_unique_id": "u" + p.FileID, "width": p.Width, "height": p.Height})
	}
	return s.pushMedia(chatID, userID, caption, map[string]any{"photo": ps})
}

// PushAudioDocument queues an audio file sent as a document ("send as
// file"): a Document carries file_name, mime_type and file_size but no
// duration (core.telegram.org/bots/api#document).
func (s *Server) PushAudioDocument(chatID, userID int64, fileID, name, mime string) int {
	size := s.fileSize(fileID)
	return s.pushMedia(chatID, userID, "", map[string]any{"document": map[string]any{
		"file_id": fileID, "file_unique_id": "u" + fileID, "file_name": name, "mime_type": mime, "file_size": size}})
}
