package main

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidybot/tidybot/adapters/discord/discordtest"
)

// dcHeldPost stands between tidybot and the fake Discord's REST API
// (the gateway's address, from GET /gateway, is the fake's own): it
// passes every call on, except that Discord's answer to the post of the
// armed text is kept from tidybot: the message is made, it reports so,
// and tidybot is killed before it learns it. (A kill after the answer
// reached tidybot is TestKillRightAfterThePost/discord.)
type dcHeldPost struct {
	armedText
	next   http.Handler
	posted chan struct{}
}

func (p *dcHeldPost) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/messages") {
		p.next.ServeHTTP(w, r)
		return
	}
	hit, ok := p.take(w, r) // a multipart upload is no answer
	if !ok {
		return
	}
	if !hit {
		p.next.ServeHTTP(w, r)
		return
	}
	p.next.ServeHTTP(httptest.NewRecorder(), r)
	p.posted <- struct{}{}
	<-r.Context().Done() // the process is gone
}

// TestDiscordKillBeforeThePostIsKnown runs `tidybot serve` as its own
// process on the fake Discord and SIGKILLs it while Discord's answer to
// an answer's post is on its way (the message is made, tidybot does not
// know it), then restarts it, -kills times (5 unless set). No answer may
// be lost, none posted twice: the restart posts what it had not seen
// confirmed again with the same nonce and enforce_nonce, and Discord
// gives back the message made the first time. (The kill in the 50 ms
// after a post is TestKillRightAfterThePost/discord.)
func TestDiscordKillBeforeThePostIsKnown(t *testing.T) {
	if testing.Short() {
		t.Skip("starts tidybot several times")
	}
	tries := *aimedKills
	if tries == 0 {
		tries = 5
	}
	e := newEnv(t)
	dc := discordtest.New(t)
	target, err := url.Parse(dc.URL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	proxy := &dcHeldPost{next: rp, posted: make(chan struct{}, 1)}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)
	addr := freeAddr(t)
	base := "http://" + addr
	environ := append(os.Environ(),
		"OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL="+e.model.URL, "OPENAI_MODEL=scripted",
		"TODOIST_TOKEN="+e.todo.Token, "TODOIST_API_URL="+e.todo.URL, "TIDYBOT_DB="+e.cfg.DB,
		"TIDYBOT_HTTP_ADDR="+addr, "TIDYBOT_METRICS_ADDR=", "TIDYBOT_LOG_LEVEL=warn",
		"DISCORD_BOT_TOKEN="+discordtest.Token, "DISCORD_API_URL="+front.URL, "TIDYBOT_ALLOWED_USERS=discord:"+dcAlice)
	bin := tidybotBinary(t)
	logs := &syncBuffer{}
	start := func() *exec.Cmd {
		t.Helper()
		before := dc.Identifies()
		cmd := exec.Command(bin, "serve")
		cmd.Env = environ
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitServing(t, base, make(chan error), logs)
		// Messages sent before the new session's IDENTIFY reach no one.
		waitFor(t, "the new gateway session", func() bool { return dc.Identifies() > before && dc.Connected() >= 1 })
		return cmd
	}
	proc := start()
	defer func() {
		_ = proc.Process.Signal(syscall.SIGTERM)
		_ = proc.Wait()
	}()
	dm := dc.DMChannel(dcAlice)
	answer := func(i int) string { return fmt.Sprintf("You said: note %d", i) }
	waitPosted := func(i int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for dcExact(dc, dm, answer(i)) == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("answer %d never posted; logs:\n%s", i, logs.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for i := range tries {
		proxy.arm(answer(i))
		dc.DM(dcAlice, fmt.Sprintf("note %d", i))
		select {
		case <-proxy.posted:
		case <-time.After(20 * time.Second):
			t.Fatalf("try %d: the answer was never posted; logs:\n%s", i, logs.String())
		}
		_ = proc.Process.Signal(syscall.SIGKILL)
		_ = proc.Wait()
		proc = start()
		waitPosted(i)
	}
	// One more message, answered in the same chat after whatever the
	// last restart had left to post.
	dc.DM(dcAlice, fmt.Sprintf("note %d", tries))
	waitPosted(tries)
	doubled, lost := 0, 0
	for i := range tries {
		switch n := dcExact(dc, dm, answer(i)); {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
	}
	t.Logf("discord: %d kills before Discord's answer to the post reached tidybot: %d answers posted twice, %d lost (%d posts asked for, %d messages shown)",
		tries, doubled, lost, dc.Requests("POST /channels/{id}/messages"), len(dc.Messages(dm)))
	if lost > 0 || doubled > 0 {
		t.Errorf("%d answers lost, %d posted twice, want none", lost, doubled)
		dcDump(t, dc, dm)
	}
}
