package openaitest

import (
	"bytes"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

// VoiceNote is a real voice note: about two seconds of speech saying
// VoiceNoteText, made once with Debian's espeak-ng and opus-tools
// (espeak-ng -w x.wav "…" && opusenc --bitrate 16 x.wav voice.ogg), in
// the Ogg/Opus format of Telegram voice notes.
//
//go:embed testdata/voice.ogg
var VoiceNote []byte

// VoiceNoteText is what VoiceNote says.
const VoiceNoteText = "move the milk task to groceries"

// Transcription is one request to POST /audio/transcriptions.
type Transcription struct {
	Model    string
	Filename string
	// ContentType is the file part's Content-Type.
	ContentType string
	Audio       []byte
}

// WithTranscripts makes the server answer POST /audio/transcriptions with
// the text f returns for each upload that passes the checks. Without it
// the server answers 404 there, like a chat-only server (Ollama, most
// vLLM deployments) does.
func WithTranscripts(f func(Transcription) string) Option {
	return func(s *Server) { s.transcribe = f }
}

// WithAudioLength makes the server report f's length of each upload as
// verbose_json's duration, as a server that decodes the audio does.
// Without it an Ogg upload is as long as its last page's granule
// position says (48 kHz samples less the OpusHead pre-skip, RFC 7845
// section 4), anything else 0.
func WithAudioLength(f func(Transcription) time.Duration) Option {
	return func(s *Server) { s.audioLength = f }
}

// WithJSONOnly makes the server refuse verbose_json for every model, as
// a server that answers json and text only does (and OpenAI does for its
// gpt-… transcription models).
func WithJSONOnly() Option { return func(s *Server) { s.jsonOnly = true } }

// Transcriptions returns the transcription requests that passed the
// checks, in order of arrival.
func (s *Server) Transcriptions() []Transcription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.transcriptions)
}

// acceptedAudio are the formats OpenAI's transcription endpoint accepts,
// told by the file name's extension: "The audio file object (not file
// name) to transcribe, in one of these formats: flac, mp3, mp4, mpeg,
// mpga, m4a, ogg, wav, or webm."
// (https://platform.openai.com/docs/api-reference/audio/createTranscription).
var acceptedAudio = []string{"flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "wav", "webm"}

// serveTranscription answers POST /audio/transcriptions: a multipart form
// with the audio in "file" and the model in "model" (required), and an
// optional "response_format" (json, the default, text, or verbose_json
// with the duration the audio plays).
func (s *Server) serveTranscription(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	f, key := s.transcribe, s.key
	s.mu.Unlock()
	if f == nil {
		s.mu.Lock()
		s.misses++
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, &APIError{Message: "Invalid URL (POST " + r.URL.Path + ")", Type: "invalid_request_error"})
		return
	}
	if e := s.check(r, Request{}, nil, key, false); e != nil && e.status == http.StatusUnauthorized {
		writeError(w, e.status, &e.APIError)
		return
	}
	t, e := readTranscription(r)
	if e != nil {
		writeError(w, e.status, &e.APIError)
		return
	}
	format := r.FormValue("response_format")
	s.mu.Lock()
	jsonOnly := s.jsonOnly
	s.mu.Unlock()
	if format == "verbose_json" && (jsonOnly || strings.HasPrefix(t.Model, "gpt-")) {
		// "For gpt-4o-transcribe and gpt-4o-mini-transcribe, the only
		// supported format is json"
		// (platform.openai.com/docs/api-reference/audio/createTranscription);
		// the same for the gpt-transcribe family.
		writeError(w, http.StatusBadRequest, &APIError{Message: "response_format 'verbose_json' is not compatible with model '" + t.Model + "'. Use 'json' or 'text' instead.",
			Type: "invalid_request_error", Param: "response_format", Code: "unsupported_value"})
		return
	}
	s.mu.Lock()
	s.transcriptions = append(s.transcriptions, t)
	length := s.audioLength
	s.mu.Unlock()
	text := f(t)
	switch format {
	case "text":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, text+"\n")
		return
	case "verbose_json":
		// The verbose transcription object: task, language, duration
		// (seconds), text, segments (createTranscription's
		// CreateTranscriptionResponseVerboseJson).
		d := oggLength(t.Audio)
		if length != nil {
			d = length(t)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"task": "transcribe", "language": "english", "duration": d.Seconds(), "text": text, "segments": []any{},
			"usage": map[string]any{"type": "duration", "seconds": int(d.Seconds() + 0.999)}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"text": text, "usage": map[string]any{"type": "duration", "seconds": 3}})
}

// oggLength is how long an Ogg Opus upload plays by its last page's
// granule position (48 kHz samples, less the pre-skip), or 0.
func oggLength(b []byte) time.Duration {
	if !validOgg(b) {
		return 0
	}
	last := bytes.LastIndex(b, []byte("OggS"))
	if last < 0 || len(b) < last+14 {
		return 0
	}
	granule := int64(binary.LittleEndian.Uint64(b[last+6 : last+14]))
	preskip := int64(0)
	if i := bytes.Index(b, []byte("OpusHead")); i >= 0 && len(b) >= i+12 {
		preskip = int64(binary.LittleEndian.Uint16(b[i+10 : i+12]))
	}
	return time.Duration(max(0, granule-preskip) * int64(time.Second) / 48000)
}

func readTranscription(r *http.Request) (Transcription, *statusError) {
	if err := r.ParseMultipartForm(maxBody); err != nil {
		return Transcription{}, invalid("", "", "Could not parse multipart form: "+err.Error())
	}
	model := r.FormValue("model")
	if model == "" {
		return Transcription{}, invalid("model", "", "you must provide a model parameter")
	}
	file, hdr, err := r.FormFile("file")
	if err != nil {
		return Transcription{}, invalid("file", "", "you must provide a file parameter")
	}
	defer file.Close()
	audio, err := io.ReadAll(file)
	if err != nil {
		return Transcription{}, invalid("file", "", "could not read the file: "+err.Error())
	}
	ext := strings.TrimPrefix(strings.ToLower(path.Ext(hdr.Filename)), ".")
	if !slices.Contains(acceptedAudio, ext) {
		return Transcription{}, invalid("file", "invalid_value",
			"Invalid file format. Supported formats: ['"+strings.Join(acceptedAudio, "', '")+"']")
	}
	if ext == "ogg" && !validOgg(audio) {
		return Transcription{}, invalid("file", "invalid_value", "Audio file might be corrupted or unsupported")
	}
	if len(audio) == 0 {
		return Transcription{}, invalid("file", "invalid_value", "Audio file is empty")
	}
	ct := hdr.Header.Get("Content-Type")
	if e := checkPartType(ct, ext, audio); e != nil {
		return Transcription{}, e
	}
	return Transcription{Model: model, Filename: hdr.Filename, ContentType: ct, Audio: audio}, nil
}

// audioTypes are the media types that name each format (RFC 4337 §2:
// audio/mp4 for MPEG-4 files with audio and no video; RFC 5334 §10.1:
// audio/ogg; RFC 3003: audio/mpeg; RFC 9639: audio/flac; WebM's
// audio/webm; the x- and older spellings servers still meet).
var audioTypes = map[string][]string{
	"ogg":  {"audio/ogg", "audio/opus"},
	"webm": {"audio/webm"},
	"mp4":  {"audio/mp4", "audio/m4a", "audio/x-m4a"},
	"wav":  {"audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave"},
	"flac": {"audio/flac", "audio/x-flac"},
	"mp3":  {"audio/mpeg", "audio/mp3"},
}

// sniffAudio tells an audio file's format from its first bytes; "" when
// none matches. It is written from the formats' own specifications, not
// from the client's reading (agent/openai/transcribe.go), so that the
// two can disagree and a test catch it:
//   - Ogg: the capture pattern "OggS" (RFC 3533 §6);
//   - WebM: the EBML header's element ID 1A 45 DF A3 (RFC 8794 §11.2.1);
//   - MP4, M4A: a FileTypeBox, type "ftyp", at bytes 4-8 of the file
//     (ISO/IEC 14496-12 §4.3; RFC 4337 for audio-only MP4);
//   - WAV: a "RIFF" chunk of form type "WAVE" (RFC 2361, Appendix A);
//   - FLAC: the stream marker "fLaC" (RFC 9639 §6);
//   - MP3: an ID3v2 tag, "ID3" (id3.org/id3v2.4.0-structure §3.1), or an
//     MPEG audio frame header's 11-bit sync word (ISO/IEC 11172-3
//     §2.4.1.3).
func sniffAudio(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("OggS")):
		return "ogg"
	case bytes.HasPrefix(b, []byte("\x1a\x45\xdf\xa3")):
		return "webm"
	case len(b) >= 12 && string(b[4:8]) == "ftyp":
		return "mp4"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WAVE":
		return "wav"
	case bytes.HasPrefix(b, []byte("fLaC")):
		return "flac"
	case bytes.HasPrefix(b, []byte("ID3")), len(b) >= 2 && b[0] == 0xff && b[1]&0xe0 == 0xe0:
		return "mp3"
	}
	return ""
}

// checkPartType rejects a file part whose Content-Type does not name
// the audio's format. OpenAI goes by the file name's extension
// (laravel/ai#316: "OpenAI's transcription API infers the audio format
// from the filename extension, not the Content-Type header"), but
// OpenAI-compatible speech servers (TIDYBOT_TRANSCRIBE_URL) go by the
// part's type: "the content-type was missing from the file parameter.
// That caused some transcription endpoints to not correctly recognize
// the content type audio/mpeg" (Robitx/gp.nvim#264; also
// open-webui/open-webui#12128). A part sent as
// application/octet-stream, or as video/mp4 for an audio-only MP4, is
// refused here as such a server refuses it.
func checkPartType(ct, ext string, audio []byte) *statusError {
	format := sniffAudio(audio)
	if format == "" {
		format = map[string]string{"oga": "ogg", "m4a": "mp4", "mpeg": "mp3", "mpga": "mp3"}[ext]
		if format == "" {
			format = ext
		}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && slices.Contains(audioTypes[format], mt) {
		return nil
	}
	return invalid("file", "invalid_value", fmt.Sprintf("Unsupported file type %q for %s audio: send the file part with Content-Type %s", ct, format, strings.Join(audioTypes[format], " or ")))
}

// validOgg reports whether b starts like an Ogg stream of Opus or Vorbis
// audio: the first page has the capture pattern "OggS", stream structure
// version 0 and the beginning-of-stream flag (RFC 3533 §6), and its first
// packet is an Opus identification header "OpusHead" (RFC 7845 §5.1) or
// a Vorbis one ("\x01vorbis").
func validOgg(b []byte) bool {
	if len(b) < 27 || string(b[:4]) != "OggS" || b[4] != 0 || b[5]&0x02 == 0 {
		return false
	}
	nseg := int(b[26])
	if len(b) < 27+nseg {
		return false
	}
	body := b[27+nseg:]
	return bytes.HasPrefix(body, []byte("OpusHead")) || bytes.HasPrefix(body, []byte("\x01vorbis"))
}

// WithoutVision makes the model one that takes no image input: a request
// with an image part gets the 400 OpenAI gives such models ("Invalid
// content type. image_url is only supported by certain models.", as
// reported for gpt-3.5-turbo on community.openai.com), and a local server
// with a text-only model gives in its own words.
func WithoutVision() Option { return func(s *Server) { s.noVision = true } }

func (s *Server) visionRule(req Request) *statusError {
	s.mu.Lock()
	off := s.noVision
	s.mu.Unlock()
	if !off {
		return nil
	}
	for i, m := range req.Messages {
		if len(m.Images) > 0 {
			return invalid(fmt.Sprintf("messages.[%d].content.[1].type", i), "", "Invalid content type. image_url is only supported by certain models.")
		}
	}
	return nil
}

// OggOpus returns an Ogg Opus stream that plays for d (rounded down to
// 60 ms): an identification header (OpusHead, RFC 7845 section 5.1), a
// comment header (OpusTags, section 5.2), then audio packets of one
// 60 ms SILK frame each (TOC configuration 3, code 0; RFC 6716 section
// 3.1), 250 packets a page, on pages with the Ogg CRC (RFC 3533). It is
// a fixture for length limits: small, and as long as asked.
func OggOpus(d time.Duration) []byte {
	var out []byte
	seq := uint32(0)
	page := func(flags byte, granule uint64, packets [][]byte) {
		var table, body []byte
		for _, p := range packets {
			n := len(p)
			for n >= 255 {
				table = append(table, 255)
				n -= 255
			}
			table = append(table, byte(n))
			body = append(body, p...)
		}
		h := []byte("OggS\x00")
		h = append(h, flags)
		h = binary.LittleEndian.AppendUint64(h, granule)
		h = binary.LittleEndian.AppendUint32(h, 0x7d1d0001) // stream serial
		h = binary.LittleEndian.AppendUint32(h, seq)
		h = append(h, 0, 0, 0, 0) // CRC, set below
		h = append(h, byte(len(table)))
		h = append(h, table...)
		pg := append(h, body...)
		binary.LittleEndian.PutUint32(pg[22:], oggCRC(pg))
		out = append(out, pg...)
		seq++
	}
	head := []byte("OpusHead\x01\x01")
	head = binary.LittleEndian.AppendUint16(head, 312) // pre-skip
	head = binary.LittleEndian.AppendUint32(head, 48000)
	head = append(head, 0, 0, 0)
	page(0x02, 0, [][]byte{head})
	tags := append([]byte("OpusTags"), 4, 0, 0, 0)
	tags = append(tags, "test"...)
	tags = append(tags, 0, 0, 0, 0)
	page(0, 0, [][]byte{tags})
	frames := int(d / (60 * time.Millisecond))
	granule := uint64(0)
	for frames > 0 {
		n := min(frames, 250)
		pkts := make([][]byte, n)
		for i := range pkts {
			pkts[i] = []byte{3 << 3, 0}
		}
		frames -= n
		granule += uint64(n) * 2880 // 60 ms at 48 kHz
		flags := byte(0)
		if frames == 0 {
			flags = 0x04 // end of stream
		}
		page(flags, granule, pkts)
	}
	return out
}

// oggCRC is the Ogg page checksum: CRC-32 with polynomial 0x04c11db7,
// no reflection, initial value and final XOR 0, over the page with its
// CRC field zeroed (RFC 3533 section 6).
func oggCRC(b []byte) uint32 {
	var crc uint32
	for _, c := range b {
		crc ^= uint32(c) << 24
		for range 8 {
			if crc&0x80000000 != 0 {
				crc = crc<<1 ^ 0x04c11db7
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}
