package media

import (
	"bytes"
	"encoding/binary"
	"path"
	"strings"
	"time"
)

// Highest bitrates, in bytes per second, of the audio formats people
// send: without a duration that can be trusted (a file sent as a document
// has none, and a client may claim 0 s), a file longer than VoiceMax at
// its format's highest bitrate is refused by its size.
const (
	// opusBytesPerSec: Opus "from 6 kbit/s to 510 kbit/s" (RFC 6716
	// section 1), Ogg and WebM voice notes.
	opusBytesPerSec = 510_000 / 8
	// mp3BytesPerSec: MPEG-1 Layer III tops out at 320 kbit/s (ISO/IEC
	// 11172-3, the bitrate_index table).
	mp3BytesPerSec = 320_000 / 8
	// aacBytesPerSec: AAC allows 6144 bits per channel per frame of 1024
	// samples (ISO/IEC 14496-3), 288 kbit/s a channel at 48 kHz; stereo.
	aacBytesPerSec = 2 * 6144 * 48_000 / 1024 / 8
	// pcmBytesPerSec: 48 kHz 16-bit stereo PCM (WAV; FLAC is never
	// larger), also the bound for a format the bot cannot tell.
	pcmBytesPerSec = 48_000 * 2 * 2
)

// audioBytesPerSec is the highest bitrate of a file's format, told by
// its name's extension or its media type.
func audioBytesPerSec(name, mimeType string) int64 {
	ext := strings.ToLower(path.Ext(name))
	mime := strings.ToLower(mimeType)
	switch {
	case ext == ".ogg" || ext == ".oga" || ext == ".opus" || ext == ".webm" || strings.Contains(mime, "ogg") || strings.Contains(mime, "opus") || strings.Contains(mime, "webm"):
		return opusBytesPerSec
	case ext == ".mp3" || ext == ".mpga" || ext == ".mpeg" || mime == "audio/mpeg" || mime == "audio/mp3":
		return mp3BytesPerSec
	case ext == ".m4a" || ext == ".mp4" || ext == ".aac" || strings.Contains(mime, "mp4") || strings.Contains(mime, "aac") || strings.Contains(mime, "m4a"):
		return aacBytesPerSec
	}
	return pcmBytesPerSec
}

// MaxAudioBytes is the largest file of a format, told by the file's
// name (its extension) or media type, that can hold at most limit of
// audio.
func MaxAudioBytes(name, mimeType string, limit time.Duration) int64 {
	return audioBytesPerSec(name, mimeType) * int64(limit/time.Millisecond) / 1000
}

// AudioDuration measures how long audio plays from its stream, not from
// what a header or the sender claims: an Ogg Opus stream by the frames
// its packets hold (each packet's TOC byte, RFC 6716 section 3.1), a WAV
// file by the PCM bytes it holds. ok is false for anything else.
func AudioDuration(audio []byte) (d time.Duration, ok bool) {
	switch {
	case bytes.HasPrefix(audio, []byte("OggS")):
		return oggOpusDuration(audio)
	case len(audio) >= 12 && string(audio[:4]) == "RIFF" && string(audio[8:12]) == "WAVE":
		return wavDuration(audio)
	}
	return 0, false
}

// oggPackets calls f with each packet of the first logical stream of an
// Ogg file (RFC 3533: pages of "OggS", a 27-byte header, a segment table;
// a packet ends at a segment shorter than 255). It stops at the first
// malformed page, or when f returns false.
func oggPackets(b []byte, f func(p []byte) bool) {
	var serial uint32
	first := true
	var pkt []byte
	for len(b) >= 27 && string(b[:4]) == "OggS" {
		nseg := int(b[26])
		if len(b) < 27+nseg {
			return
		}
		table := b[27 : 27+nseg]
		body := b[27+nseg:]
		size := 0
		for _, l := range table {
			size += int(l)
		}
		if len(body) < size {
			return
		}
		s := binary.LittleEndian.Uint32(b[14:18])
		if first {
			serial, first = s, false
		}
		if s == serial {
			off := 0
			for _, l := range table {
				pkt = append(pkt, body[off:off+int(l)]...)
				off += int(l)
				if l < 255 {
					if !f(pkt) {
						return
					}
					pkt = pkt[:0]
				}
			}
		}
		b = body[size:]
	}
}

// oggOpusDuration adds up the frames of an Ogg Opus stream's audio
// packets (after OpusHead and OpusTags, RFC 7845 section 3).
func oggOpusDuration(b []byte) (time.Duration, bool) {
	var total time.Duration
	n := 0
	opus := false
	oggPackets(b, func(p []byte) bool {
		n++
		switch {
		case n == 1:
			opus = bytes.HasPrefix(p, []byte("OpusHead"))
			return opus
		case n == 2 || len(p) == 0:
			return true // OpusTags; an empty packet holds no audio
		}
		total += opusPacketDuration(p)
		return true
	})
	return total, opus
}

// opusPacketDuration is the audio one Opus packet holds: its TOC byte's
// configuration gives the frame size, its code the number of frames
// (RFC 6716 section 3.1 and 3.2).
func opusPacketDuration(p []byte) time.Duration {
	toc := p[0]
	config := toc >> 3
	var frame time.Duration
	switch {
	case config < 12: // SILK-only: 10, 20, 40, 60 ms
		frame = []time.Duration{10, 20, 40, 60}[config%4] * time.Millisecond
	case config < 16: // hybrid: 10, 20 ms
		frame = []time.Duration{10, 20}[config%2] * time.Millisecond
	default: // CELT-only: 2.5, 5, 10, 20 ms
		frame = []time.Duration{2500, 5000, 10000, 20000}[config%4] * time.Microsecond
	}
	switch toc & 3 {
	case 0:
		return frame
	case 1, 2:
		return 2 * frame
	}
	if len(p) < 2 {
		return 0
	}
	return time.Duration(p[1]&0x3f) * frame
}

// wavDuration is the PCM data of a WAV file over its byte rate (the
// "fmt " chunk's avg bytes per second), counting only the bytes the file
// holds, whatever the "data" chunk's size says.
func wavDuration(b []byte) (time.Duration, bool) {
	var rate int64
	p := b[12:]
	for len(p) >= 8 {
		id, n := string(p[:4]), int64(binary.LittleEndian.Uint32(p[4:8]))
		n = min(n, int64(len(p)-8))
		switch id {
		case "fmt ":
			if n >= 12 {
				rate = int64(binary.LittleEndian.Uint32(p[16:20]))
			}
		case "data":
			if rate <= 0 {
				return 0, false
			}
			return time.Duration(n * int64(time.Second) / rate), true
		}
		p = p[min(int64(len(p)), 8+n+n&1):]
	}
	return 0, false
}
