package bot

import (
	"strings"
	"unicode"
)

// verdict is what a typed reply to a confirmation says.
type verdict int

const (
	// neither: anything that is not plainly a yes or a no. The write is
	// not applied; the words go to the model, which may plan again.
	neither verdict = iota
	yes
	no
)

// Phrases that make up a yes or a no, lower case, words separated by one
// space. A reply is a yes when it is made only of yes phrases (and
// politeness), so "yes, do it" is a yes and "yes, but only the first one"
// or "yesterday's list is fine" is not.
var (
	yesPhrases = phraseSet("yes", "y", "yeah", "yep", "yup", "ya", "ok", "okay", "k", "sure", "do it", "confirm", "confirmed",
		"go ahead", "go", "go for it", "proceed", "please do", "absolutely", "of course", "right", "correct", "approve", "approved",
		"👍", "✅", "✔", "👌")
	noPhrases = phraseSet("no", "n", "nope", "nah", "cancel", "stop", "don't", "dont", "do not", "don't do it", "do not do it",
		"never mind", "nevermind", "abort", "not now", "keep it", "keep them", "leave it", "leave them",
		"👎", "❌", "✖", "🚫", "✋")
	// politeness may stand beside either answer without changing it.
	politeness = phraseSet("please", "thanks", "thank you", "thx", "ty")
)

func phraseSet(ps ...string) map[string]bool {
	m := make(map[string]bool, len(ps))
	for _, p := range ps {
		m[p] = true
	}
	return m
}

// confirmVerdict reads a typed reply to a confirmation; case,
// punctuation (but a question mark), emoji variants and surrounding
// politeness do not matter.
func confirmVerdict(text string) verdict {
	if strings.ContainsAny(text, "?¿？") {
		return neither // "yes?", "ok?": a question back, not an answer
	}
	words := replyWords(text)
	if len(words) == 0 {
		return neither
	}
	switch {
	case madeOf(words, yesPhrases):
		return yes
	case madeOf(words, noPhrases):
		return no
	}
	return neither
}

// replyWords lower-cases text and splits it into words and emoji, dropping
// punctuation, emoji modifiers (skin tones, variation selectors) and
// typographic apostrophes.
func replyWords(text string) []string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == '’' || r == '\'':
			b.WriteRune('\'')
		case r == '\ufe0f' || r == '\u200d' || (r >= 0x1f3fb && r <= 0x1f3ff):
			// variation selector, joiner, skin tone: part of the emoji before
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		case unicode.IsSymbol(r) && r > unicode.MaxASCII:
			b.WriteString(" " + string(r) + " ") // an emoji is a word of its own
		default:
			b.WriteRune(' ') // spaces and punctuation separate words
		}
	}
	words := strings.Fields(b.String())
	for i, w := range words {
		words[i] = strings.Trim(w, "'")
	}
	return words
}

// madeOf reports whether words split wholly into phrases of set and of
// politeness, with at least one of set.
func madeOf(words []string, set map[string]bool) bool {
	// ok[i]: words[i:] can be split, found[i]: with a phrase of set.
	n := len(words)
	ok := make([]bool, n+1)
	found := make([]bool, n+1)
	ok[n] = true
	for i := n - 1; i >= 0; i-- {
		for j := i + 1; j <= n && j-i <= 4; j++ {
			if !ok[j] {
				continue
			}
			p := strings.Join(words[i:j], " ")
			if set[p] {
				ok[i], found[i] = true, true
				break
			}
			if politeness[p] {
				ok[i] = true
				found[i] = found[i] || found[j]
			}
		}
	}
	return ok[0] && found[0]
}

// confirmAnswer is what the agent hears for a typed reply to a
// confirmation: exactly "yes" or "no" when the reply is one, else the
// user's own words in quotes, which the agent can never read as a yes.
func confirmAnswer(text string) string {
	switch confirmVerdict(text) {
	case yes:
		return "yes"
	case no:
		return "no"
	}
	return "“" + strings.TrimSpace(text) + "”"
}

// askedUser is the only user who may answer r's question.
func askedUser(r *Run) string {
	if r.Waiting != nil && r.Waiting.UserID != "" {
		return r.Waiting.UserID
	}
	return r.UserID
}

// into points an event of run r's user at r's conversation (a button
// press carries its chat, not always its thread or whether it is a DM).
func into(in Incoming, r *Run) Incoming {
	in.ChatID, in.ThreadID = r.ChatID, r.ThreadID
	in.DM = true
	if in.ThreadKey() != r.ThreadKey {
		in.DM = false
	}
	return in
}
