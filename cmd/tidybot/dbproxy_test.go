package main

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// dbProxy is a TCP relay between one replica and PostgreSQL. cut()
// drops every byte either way, and new connections hang unanswered,
// without closing anything (a network cut, not a closed socket); heal()
// closes every connection the cut made dead, as the TCP keepalives of
// both ends do on a real network well within a 30 s cut, and lets new
// connections through. (Like store/postgres's partition relay.)
type dbProxy struct {
	ln     net.Listener
	target string
	isCut  atomic.Bool

	mu    sync.Mutex // protects conns
	conns []net.Conn
}

func newDBProxy(t testing.TB, target string) *dbProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dbProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.closeAll() })
	return p
}

// via returns the database URL u reached through p.
func (p *dbProxy) via(t testing.TB, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = p.ln.Addr().String()
	return pu.String()
}

func (p *dbProxy) cut() { p.isCut.Store(true) }

func (p *dbProxy) heal() {
	p.closeAll()
	p.isCut.Store(false)
}

func (p *dbProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *dbProxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, cs...)
}

func (p *dbProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.isCut.Load() {
			p.track(c) // the SYN is lost: nothing answers
			go func() { _, _ = io.Copy(io.Discard, c) }()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(c, s)
		var dead atomic.Bool
		go p.relay(c, s, &dead)
		go p.relay(s, c, &dead)
	}
}

// relay copies from to to until the cut costs the connection a byte;
// then it only discards, passing no end on.
func (p *dbProxy) relay(from, to net.Conn, dead *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && p.isCut.Load() {
			dead.Store(true)
		}
		if n > 0 && !dead.Load() {
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !dead.Load() {
				_ = to.Close()
			}
			return
		}
	}
}
