package inspector

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidybot/tidybot/bot"
)

func TestWriteRunText(t *testing.T) {
	v, err := Build(questionRun(t, "r", "Buy cake"), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteRun(&b, v); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Run r · done · telegram:42 · ",
		"Asked:  clean up Buy cake",
		"Answer: Deleted Buy cake",
		"Totals: model 4 calls 3.6s, 6,900 prompt + 107 completion tokens · Todoist 3 requests 980ms · waiting for you 2h1m",
		"Step 1   MMMM",
		"W~",
		"Step 2 · model 900ms, 1,700 + 30 tokens · waited 2h0m0s for you",
		"ask_user: Delete which task?\n    answer: T1",
		"delete_tasks [write] [you confirmed it]",
		"Todoist apply 420ms",
		"• deleted “Buy cake” (undone)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text lacks %q:\n%s", want, out)
		}
	}
}

func TestTextHandlerListsAndShows(t *testing.T) {
	old := questionRun(t, "old", "Buy cake")
	young := questionRun(t, "young", "Call mum")
	young.Created = t0.Add(50 * time.Minute)
	young.Status = bot.RunWaiting
	old.Feedback = &bot.Feedback{Rating: bot.FeedbackBad, At: t0}
	h := TextHandler(memSource{"old": old, "young": young}, nil, func() time.Time { return t0.Add(time.Hour) }, func(id string) string { return "https://x/runs/" + id + "?sig=s" })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	code, list := get("/runs")
	if code != http.StatusOK {
		t.Fatalf("HTTP %d", code)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[1], "young") || !strings.HasPrefix(lines[2], "old") {
		t.Fatalf("list, want newest first:\n%s", list)
	}
	for _, want := range []string{"CONVERSATION", "STATUS", "STEPS", "TOKENS", "AGE", "RATED"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header lacks %s: %s", want, lines[0])
		}
	}
	if f := strings.Fields(lines[1]); strings.Join(f[1:], " ") != "telegram:42 waiting 4 7,007 10m -" {
		t.Errorf("row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); f[len(f)-1] != "👎" {
		t.Errorf("row of the rated run %q, want 👎 last", lines[2])
	}
	if _, one := get("/runs?n=1"); strings.Count(one, "\n") != 2 {
		t.Errorf("n=1 listed:\n%s", one)
	}
	if code, body := get("/runs/old"); code != http.StatusOK || !strings.Contains(body, "Asked:  clean up Buy cake") || !strings.Contains(body, "Rated:  👎 by the person who asked") {
		t.Errorf("show: HTTP %d\n%s", code, body)
	}
	if code, _ := get("/runs/nope"); code != http.StatusNotFound {
		t.Errorf("unknown run: HTTP %d", code)
	}
	if code, body := get("/runs/old/link"); code != http.StatusOK || body != "https://x/runs/old?sig=s\n" {
		t.Errorf("link: HTTP %d %q", code, body)
	}
	if code, _ := get("/runs/nope/link"); code != http.StatusNotFound {
		t.Errorf("link of an unknown run: HTTP %d", code)
	}
}
