// Package utf16text measures, clips and splits text in UTF-16 code
// units, the unit in which Telegram counts a message's length
// (core.telegram.org/api/entities: "lengths are in UTF-16 code units")
// and the one the Discord adapter uses too: it never counts fewer than
// Discord's code points, so a part that fits here fits there. The
// adapters that split long answers share it, so a fix to where a text is
// cut is made once.
package utf16text

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// runeUnits is r's length in UTF-16 code units (an invalid byte, read as
// U+FFFD, is one).
func runeUnits(r rune) int {
	if utf16.RuneLen(r) == 2 {
		return 2
	}
	return 1
}

// Units counts s's UTF-16 code units.
func Units(s string) int {
	n := 0
	for _, r := range s {
		n += runeUnits(r)
	}
	return n
}

// Within returns the length in bytes of the longest prefix of s of at
// most n UTF-16 units (len(s) when all of s fits): one pass over at most
// that prefix, so that cutting a long text is linear in its length.
func Within(s string, n int) int {
	used := 0
	for i, r := range s {
		used += runeUnits(r)
		if used > n {
			return i
		}
	}
	return len(s)
}

// Clip cuts s to at most n UTF-16 units, ending a cut text with "…".
func Clip(s string, n int) string {
	if Units(s) <= n {
		return s
	}
	return s[:Within(s, n-1)] + "…"
}

// Split cuts text into parts of at most n UTF-16 units (a character
// longer than n alone in its part), at a line break where it can, else
// at a space, else anywhere; it never returns an empty part (an empty
// text becomes "…": Telegram and Discord both refuse an empty message).
func Split(text string, n int) []string {
	text = strings.TrimSpace(text)
	if text == "" {
		return []string{"…"}
	}
	var out []string
	for {
		cut := Within(text, n)
		if cut == len(text) {
			break
		}
		if cut == 0 { // n is less than the first character: it goes alone
			_, cut = utf8.DecodeRuneInString(text)
		}
		head := text[:cut]
		if i := strings.LastIndex(head, "\n"); i > len(head)/2 {
			head = head[:i]
		} else if i := strings.LastIndex(head, " "); i > len(head)/2 {
			head = head[:i]
		}
		out = append(out, strings.TrimSpace(head))
		text = strings.TrimSpace(text[len(head):])
	}
	if text != "" {
		out = append(out, text)
	}
	return out
}
