package main

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

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
	dc := discordtest.New(t)
	target, err := url.Parse(dc.URL())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	proxy := &dcHeldPost{next: rp, posted: make(chan struct{}, 1)}
	doubled, lost := killAfterPosts(t, dcKill(dc), proxy, proxy.posted, 0, tries)
	dm := dc.DMChannel(dcAlice)
	t.Logf("discord: %d kills before Discord's answer to the post reached tidybot: %d answers posted twice, %d lost (%d posts asked for, %d messages shown)",
		tries, doubled, lost, dc.Requests("POST /channels/{id}/messages"), len(dc.Messages(dm)))
	if lost > 0 || doubled > 0 {
		t.Errorf("%d answers lost, %d posted twice, want none", lost, doubled)
		dcDump(t, dc, dm)
	}
}
