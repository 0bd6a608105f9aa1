package media

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/tidybot/tidybot/agent/openai/openaitest"
)

func wavOf(d time.Duration, claimed uint32) []byte {
	const rate = 16000 * 2 // 16 kHz 16-bit mono
	data := make([]byte, int64(d)*rate/int64(time.Second))
	b := []byte("RIFF\x00\x00\x00\x00WAVEfmt ")
	b = binary.LittleEndian.AppendUint32(b, 16)
	b = binary.LittleEndian.AppendUint16(b, 1) // PCM
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint32(b, 16000)
	b = binary.LittleEndian.AppendUint32(b, rate)
	b = binary.LittleEndian.AppendUint16(b, 2)
	b = binary.LittleEndian.AppendUint16(b, 16)
	b = append(b, "data"...)
	b = binary.LittleEndian.AppendUint32(b, claimed)
	return append(b, data...)
}

func TestAudioDurationFromTheStream(t *testing.T) {
	tests := []struct {
		name  string
		audio []byte
		want  time.Duration
		ok    bool
	}{
		{"a real voice note", openaitest.VoiceNote, 2120 * time.Millisecond, true},
		{"90 s of Ogg Opus", openaitest.OggOpus(90 * time.Second), 90 * time.Second, true},
		{"WAV, 3 s", wavOf(3*time.Second, 3*32000), 3 * time.Second, true},
		// The data chunk claims 10 minutes; the file holds 2 s.
		{"WAV that claims more than it holds", wavOf(2*time.Second, 600*32000), 2 * time.Second, true},
		{"MP3", append([]byte("ID3\x04"), bytes.Repeat([]byte{0xff, 0xfb}, 100)...), 0, false},
		{"Ogg Vorbis", append([]byte("OggS\x00\x02"), make([]byte, 30)...), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AudioDuration(tt.audio)
			if got != tt.want || ok != tt.ok {
				t.Errorf("got %v %v, want %v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestMaxAudioBytes(t *testing.T) {
	tests := []struct {
		name, mime string
		want       int64
	}{
		{"voice.ogg", "", 63_750 * 300},
		{"talk.mp3", "", 40_000 * 300},
		{"memo.m4a", "", 72_000 * 300},
		{"file", "audio/ogg", 63_750 * 300},
		{"raw.wav", "", 192_000 * 300},
		{"what", "", 192_000 * 300},
	}
	for _, tt := range tests {
		if got := MaxAudioBytes(tt.name, tt.mime, 5*time.Minute); got != tt.want {
			t.Errorf("%s %s: %d, want %d", tt.name, tt.mime, got, tt.want)
		}
	}
}
