package postgres

import (
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
)

// cutProxy is a TCP relay to the test's PostgreSQL on another loopback
// port. cut() emulates a network partition: every byte in flight either
// way is lost, and a connection that lost bytes stays dead for ever
// (its end is not told to the other side: the FIN or RST is lost too),
// as when a replica's host vanishes or a link drops. heal() lets new
// connections through again. (TCP keepalive probes are answered by the
// relay's own kernel, so the server never notices a dead connection by
// itself here; on a real network it does so after tcp_keepalives_idle.)
type cutProxy struct {
	ln     net.Listener
	target string
	isCut  atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
	closed atomic.Bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *cutProxy) addr() string { return p.ln.Addr().String() }

func (p *cutProxy) cut()  { p.isCut.Store(true) }
func (p *cutProxy) heal() { p.isCut.Store(false) }

func (p *cutProxy) close() {
	p.closed.Store(true)
	_ = p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if p.isCut.Load() {
			// A partitioned host: the SYN is lost; the dialer times out
			// (emulated by holding the socket without answering).
			p.track(c)
			go func() { _, _ = io.Copy(io.Discard, c) }()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(c)
		p.track(s)
		var dead atomic.Bool
		go p.relay(c, s, &dead)
		go p.relay(s, c, &dead)
	}
}

func (p *cutProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

// relay copies from to to; once the partition cost the connection a
// byte, it only discards, and never passes on an end.
func (p *cutProxy) relay(from, to net.Conn, dead *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if p.isCut.Load() {
				dead.Store(true)
			}
			if !dead.Load() {
				if _, werr := to.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			if !dead.Load() && !p.isCut.Load() {
				_ = to.Close()
			} else {
				dead.Store(true)
			}
			return
		}
	}
}

// viaProxy returns u with its host replaced by addr.
func viaProxy(t *testing.T, u, addr string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = addr
	q := pu.Query()
	q.Set("connect_timeout", "3")
	pu.RawQuery = q.Encode()
	return pu.String()
}
