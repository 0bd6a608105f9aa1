package pgtest

import (
	"bytes"
	"io"
	"maps"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Proxy is a TCP relay to a test's PostgreSQL on another loopback port.
// Cut emulates a network partition: every byte in flight either way is
// lost, a connection that lost bytes stays dead for ever (its end is
// not told to the other side: the FIN or RST is lost too), and new
// connections hang unanswered, as when a replica's host vanishes or a
// link drops. Heal lets new connections through again; CloseAll closes
// every connection, as both ends' TCP keepalives do on a real network
// (here the relay's own kernel answers keepalive probes, so the server
// never notices a dead connection by itself).
//
// It also counts what it relays (Stats): a round trip is a burst from
// the client followed by the server's answer, counted on each
// connection when the server speaks after the client did (so a pgx
// batch or pipeline costs one, and a NOTIFY the server pushes unasked
// costs none); connection set-up (start-up, authentication) counts too.
// Statements tells where they went, by the statement each began with
// (read from the protocol's messages, which TLS hides: sslmode=disable).
type Proxy struct {
	ln     net.Listener
	target string
	isCut  atomic.Bool

	roundTrips, toServer, toClient atomic.Int64

	smu sync.Mutex // protects stmts and commits
	// stmts counts the round trips by the statement that began them.
	stmts map[string]int64
	// commits counts the committed write transactions by what they
	// wrote.
	commits map[string]int64

	mu    sync.Mutex // protects conns
	conns []net.Conn

	pmu   sync.Mutex // protects pause
	pause *pause
}

// pause is a PauseAt waiting for its burst.
type pause struct {
	match           []byte
	reached, resume chan struct{}
}

// PauseAt holds, before the server sees it, the next client burst whose
// bytes hold sql (as a Parse or Query message carries a statement's
// text: a statement the connection prepared already goes by its name),
// until resume is called; reached is closed once it is held. It lets a
// test put another transaction between two statements of a client.
func (p *Proxy) PauseAt(sql string) (reached <-chan struct{}, resume func()) {
	ps := &pause{match: []byte(sql), reached: make(chan struct{}), resume: make(chan struct{})}
	p.pmu.Lock()
	p.pause = ps
	p.pmu.Unlock()
	var once sync.Once
	return ps.reached, func() { once.Do(func() { close(ps.resume) }) }
}

// held waits while b is the burst a PauseAt holds.
func (p *Proxy) held(b []byte) {
	p.pmu.Lock()
	ps := p.pause
	if ps == nil || !bytes.Contains(b, ps.match) {
		p.pmu.Unlock()
		return
	}
	p.pause = nil
	p.pmu.Unlock()
	close(ps.reached)
	<-ps.resume
}

// NewProxy starts a relay to target (host:port), closed at t's end.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target}
	go p.accept()
	t.Cleanup(func() { _ = ln.Close(); p.CloseAll() })
	return p
}

// Addr is the relay's address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Via returns the database URL u reached through the relay, giving up
// a connection attempt after 3 s.
func (p *Proxy) Via(t testing.TB, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pu.Host = p.Addr()
	q := pu.Query()
	q.Set("connect_timeout", "3")
	pu.RawQuery = q.Encode()
	return pu.String()
}

// Stats is what the relay passed on since it started or was Reset.
type Stats struct {
	RoundTrips int64 // client bursts answered by the server, over all connections
	ToServer   int64 // bytes from clients to the server
	ToClient   int64 // bytes from the server to clients
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	return Stats{RoundTrips: p.roundTrips.Load(), ToServer: p.toServer.Load(), ToClient: p.toClient.Load()}
}

// RoundTrips returns the round trips counted so far.
func (p *Proxy) RoundTrips() int64 { return p.roundTrips.Load() }

// Statements returns the round trips counted so far by the statement
// each began with (its SQL, spaces collapsed, cut at 120 bytes; with
// " +N" when N more statements shared it, as in a batch; "prepare "
// and the SQL when it only prepared; "connect" for set-up; "?" when the
// traffic could not be read).
func (p *Proxy) Statements() map[string]int64 {
	p.smu.Lock()
	defer p.smu.Unlock()
	out := make(map[string]int64, len(p.stmts))
	for k, v := range p.stmts {
		out[k] = v
	}
	return out
}

// Commits returns the write transactions committed so far, by what
// each wrote (its INSERT, UPDATE, DELETE and MERGE statements by table,
// in the order first run: "INSERT messages, DELETE jobs"): every COMMIT
// the server accepted (of a transaction begun by BEGIN, whatever it
// wrote: a row locked FOR SHARE is a write too), and every group of
// statements outside one that changed a row (one implicit transaction
// until the next Sync, labelled "(no BEGIN) …"). Each is a commit
// record the server flushes to its WAL before answering (with the
// default synchronous_commit).
func (p *Proxy) Commits() map[string]int64 {
	p.smu.Lock()
	defer p.smu.Unlock()
	return maps.Clone(p.commits)
}

func (p *Proxy) countCommit(label string) {
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.commits == nil {
		p.commits = map[string]int64{}
	}
	p.commits[label]++
}

// Reset sets the counts to zero (a burst under way when it is called
// may still be counted once, when its answer comes).
func (p *Proxy) Reset() {
	p.smu.Lock()
	p.stmts, p.commits = nil, nil
	p.smu.Unlock()
	p.roundTrips.Store(0)
	p.toServer.Store(0)
	p.toClient.Store(0)
}

func (p *Proxy) countRoundTrip(label string) {
	p.roundTrips.Add(1)
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.stmts == nil {
		p.stmts = map[string]int64{}
	}
	p.stmts[label]++
}

// Cut starts the partition.
func (p *Proxy) Cut() { p.isCut.Store(true) }

// Heal ends it for new connections.
func (p *Proxy) Heal() { p.isCut.Store(false) }

// CloseAll closes every connection relayed so far.
func (p *Proxy) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// UpstreamPorts are the local ports of the relay's connections to the
// server (the server's peers), for reading their state in /proc.
func (p *Proxy) UpstreamPorts() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ports []int
	for _, c := range p.conns {
		if c.RemoteAddr().String() == p.target {
			_, port, _ := strings.Cut(c.LocalAddr().String(), ":")
			n, _ := strconv.Atoi(port)
			ports = append(ports, n)
		}
	}
	return ports
}

func (p *Proxy) track(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, cs...)
}

func (p *Proxy) accept() {
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
		p.track(c, s)
		var dead atomic.Bool
		w := &wire{prepared: map[string]string{}, committed: p.countCommit}
		go p.relay(c, s, &dead, func(b []byte) {
			p.held(b)
			p.toServer.Add(int64(len(b)))
			w.fromClient(b)
		})
		go p.relay(s, c, &dead, func(b []byte) {
			p.toClient.Add(int64(len(b)))
			if label, ok := w.fromServer(b); ok {
				p.countRoundTrip(label)
			}
		})
	}
}

// relay copies from to to, telling passed of each chunk it passed on
// (before writing it, so the count is there when the other end reads);
// once the partition cost the connection a byte, it only discards, and
// never passes on an end.
func (p *Proxy) relay(from, to net.Conn, dead *atomic.Bool, passed func(b []byte)) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 && p.isCut.Load() {
			dead.Store(true)
		}
		if n > 0 && !dead.Load() {
			passed(buf[:n])
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
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
