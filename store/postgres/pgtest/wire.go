package pgtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
)

// wire follows one relayed connection's PostgreSQL protocol
// (https://www.postgresql.org/docs/current/protocol-message-formats.html)
// far enough to name each round trip by the statement that began it.
type wire struct {
	mu sync.Mutex // protects the fields below
	// asked is set when the client spoke since the server last did.
	asked bool
	// started is set once the start-up message went: typed messages
	// follow. sslAsked is set while an SSLRequest waits for its answer;
	// unreadable once the server accepted it (TLS) or a message made
	// no sense.
	started, sslAsked, unreadable bool
	buf                           []byte // a client message not complete yet
	prepared                      map[string]string
	// The burst in flight: the statements it ran, and the first it
	// only prepared (Parse without Bind).
	ran      []string
	parsed   string
	connects bool
}

// fromClient reads what the client sent.
func (w *wire) fromClient(b []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.asked = true
	if w.unreadable {
		return
	}
	w.buf = append(w.buf, b...)
	for w.next() {
	}
}

// fromServer reads what the server sent and tells, when it answers a
// client burst, what began that burst.
func (w *wire) fromServer(b []byte) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.sslAsked && len(b) > 0 {
		w.sslAsked = false
		if b[0] == 'S' {
			w.unreadable = true // TLS from here on
		}
	}
	if !w.asked {
		return "", false
	}
	w.asked = false
	label := "?"
	switch {
	case w.unreadable:
	case len(w.ran) > 0:
		label = w.ran[0]
		if len(w.ran) > 1 {
			label += fmt.Sprintf(" +%d", len(w.ran)-1)
		}
	case w.parsed != "":
		label = "prepare " + w.parsed
	case w.connects:
		label = "connect"
	}
	w.ran, w.parsed, w.connects = nil, "", false
	return label, true
}

// next consumes one complete message of buf, if there is one.
func (w *wire) next() bool {
	if !w.started {
		if len(w.buf) < 8 {
			return false
		}
		n := int(binary.BigEndian.Uint32(w.buf))
		if n < 8 || n > 1<<20 {
			w.unreadable = true
			return false
		}
		if len(w.buf) < n {
			return false
		}
		switch binary.BigEndian.Uint32(w.buf[4:]) {
		case 80877103, 80877104: // SSLRequest, GSSENCRequest: the start-up comes next
			w.sslAsked = true
		default:
			w.started = true
		}
		w.connects = true
		w.buf = w.buf[n:]
		return true
	}
	if len(w.buf) < 5 {
		return false
	}
	n := int(binary.BigEndian.Uint32(w.buf[1:])) + 1
	if n < 5 || n > 1<<30 {
		w.unreadable = true
		return false
	}
	if len(w.buf) < n {
		return false
	}
	typ, body := w.buf[0], w.buf[5:n]
	switch typ {
	case 'Q': // simple query
		w.ran = append(w.ran, short(cstring(body, 0)))
	case 'P': // Parse: statement name, SQL
		name := cstring(body, 0)
		sql := cstring(body, 1)
		w.prepared[name] = sql
		if w.parsed == "" {
			w.parsed = short(sql)
		}
	case 'B': // Bind: portal, statement name
		w.ran = append(w.ran, short(w.prepared[cstring(body, 1)]))
	case 'p': // password, SASL
		w.connects = true
	}
	w.buf = w.buf[n:]
	if len(w.buf) == 0 {
		w.buf = nil // let a large message's buffer go
	}
	return true
}

// cstring returns the i-th NUL-terminated string of b.
func cstring(b []byte, i int) string {
	for ; i > 0; i-- {
		j := bytes.IndexByte(b, 0)
		if j < 0 {
			return ""
		}
		b = b[j+1:]
	}
	if j := bytes.IndexByte(b, 0); j >= 0 {
		b = b[:j]
	}
	return string(b)
}

// short collapses a statement's spaces and cuts it at 120 bytes.
func short(sql string) string {
	s := strings.Join(strings.Fields(sql), " ")
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}
