package utf16text

import (
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// TestSplitCutsAtLineBreaksThenSpaces: a part ends at the last line
// break of its second half, else at the last space there, else at the
// limit; a character of two units is never cut in two.
func TestSplitCutsAtLineBreaksThenSpaces(t *testing.T) {
	for _, tt := range []struct {
		text string
		n    int
		want []string
	}{
		{"", 10, []string{"…"}},
		{"  hi  ", 10, []string{"hi"}},
		{"aaaaa\nbbb cc", 8, []string{"aaaaa", "bbb cc"}},
		{"aaaa\nbbbbbbb", 8, []string{"aaaa\nbbb", "bbbb"}}, // the break is in the first half: cut at the limit
		{"aaaaa bbbbbb", 8, []string{"aaaaa", "bbbbbb"}},
		{"aaaaaaaaaa", 4, []string{"aaaa", "aaaa", "aa"}},
		{"🎂🎂🎂", 5, []string{"🎂🎂", "🎂"}},
		{"🎂a", 1, []string{"🎂", "a"}}, // shorter than a character: no endless loop
	} {
		got := Split(tt.text, tt.n)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("Split(%q, %d) = %q, want %q", tt.text, tt.n, got, tt.want)
		}
	}
	if got := Clip("🎂🎂🎂", 4); got != "🎂…" {
		t.Errorf("Clip = %q, want 🎂…", got)
	}
	if got := Units("a🎂"); got != 3 {
		t.Errorf("Units = %d, want 3", got)
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"", "hi", strings.Repeat("a", 5000), strings.Repeat("🎂 ", 3000), "line\n" + strings.Repeat("x", 4100)} {
		f.Add(s, 4096)
	}
	f.Add("a b c d e f", 3)
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 2 || n > 5000 || !utf8.ValidString(s) {
			return // Telegram takes only valid UTF-8
		}
		chunks := Split(s, n)
		if len(chunks) == 0 {
			t.Fatal("no chunks")
		}
		for _, c := range chunks {
			if c == "" || len(utf16.Encode([]rune(c))) > n {
				t.Fatalf("chunk of %d units (limit %d): %q", len(utf16.Encode([]rune(c))), n, c)
			}
		}
		squash := func(x string) string { return strings.Join(strings.Fields(x), "") }
		if squash(strings.Join(chunks, "")) != squash(s) && strings.TrimSpace(s) != "" {
			t.Fatalf("text lost or changed")
		}
	})
}

// BenchmarkSplitLongAnswer: a runaway 1 MB answer is cut into 4,096-unit
// messages (and its draft takes the first) in one pass: Split was
// quadratic, converting what was left of the text at every cut (2 s of
// CPU for 1 MB, 0.2 s of it in the draft alone).
func BenchmarkSplitLongAnswer(b *testing.B) {
	text := strings.Repeat("blah ", 200_000)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if parts := Split(text, 4096); len(parts) < 244 {
			b.Fatalf("%d parts", len(parts))
		}
	}
}
