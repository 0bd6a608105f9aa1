package pgtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
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

	// The transactions (see Proxy.Commits): open is what the client
	// ran since its last Sync, sent the statements of each Sync (or
	// simple query) not answered yet, in order; answered counts those
	// of sent[0] the server finished. srvBuf is a server message not
	// complete yet.
	open     []string
	sent     [][]string
	answered int
	srvBuf   []byte
	// inTx is set inside a transaction begun by BEGIN; writes names
	// what it wrote so far (see written); implicit what was written
	// outside one since the last ReadyForQuery.
	inTx             bool
	writes, implicit []string
	// committed is told of each committed write transaction, by what
	// it wrote.
	committed func(label string)
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
		b = b[1:] // the answer is one byte; typed messages follow
	}
	if !w.unreadable {
		w.srvBuf = append(w.srvBuf, b...)
		for w.nextFromServer() {
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
		sql := short(cstring(body, 0))
		w.ran = append(w.ran, sql)
		w.sent = append(w.sent, []string{sql})
	case 'S': // Sync: what was run since the last one is answered together
		w.sent = append(w.sent, w.open)
		w.open = nil
	case 'P': // Parse: statement name, SQL
		name := cstring(body, 0)
		sql := cstring(body, 1)
		w.prepared[name] = sql
		if w.parsed == "" {
			w.parsed = short(sql)
		}
	case 'B': // Bind: portal, statement name
		sql := short(w.prepared[cstring(body, 1)])
		w.ran = append(w.ran, sql)
		w.open = append(w.open, sql)
	case 'p': // password, SASL
		w.connects = true
	}
	w.buf = w.buf[n:]
	if len(w.buf) == 0 {
		w.buf = nil // let a large message's buffer go
	}
	return true
}

// nextFromServer consumes one complete message of srvBuf, if there is
// one, following the transactions: a CommandComplete (or an error)
// finishes the next statement sent, a ReadyForQuery the statements of
// one Sync.
func (w *wire) nextFromServer() bool {
	if len(w.srvBuf) < 5 {
		return false
	}
	n := int(binary.BigEndian.Uint32(w.srvBuf[1:])) + 1
	if n < 5 || n > 1<<30 {
		w.unreadable = true
		return false
	}
	if len(w.srvBuf) < n {
		return false
	}
	typ, body := w.srvBuf[0], w.srvBuf[5:n]
	switch typ {
	case 'C': // CommandComplete: its tag
		w.finished(w.statement(), cstring(body, 0))
	case 'E', 'I': // ErrorResponse (what the Sync holds after it is skipped), EmptyQueryResponse
		w.finished(w.statement(), "")
	case 'Z': // ReadyForQuery: the transaction's status
		if len(w.sent) > 0 {
			w.sent, w.answered = w.sent[1:], 0
		}
		if len(body) > 0 && body[0] == 'I' {
			if len(w.implicit) > 0 && !w.inTx {
				w.commit("(no BEGIN) " + strings.Join(w.implicit, ", "))
			}
			w.inTx = false
		}
		w.implicit = nil
	}
	w.srvBuf = w.srvBuf[n:]
	if len(w.srvBuf) == 0 {
		w.srvBuf = nil
	}
	return true
}

// statement is the next statement sent that the server has not
// finished, "?" if none is known.
func (w *wire) statement() string {
	if len(w.sent) == 0 || w.answered >= len(w.sent[0]) {
		return "?"
	}
	w.answered++
	return w.sent[0][w.answered-1]
}

// finished follows the transactions as the server finishes statement
// sql with tag ("" for an error).
func (w *wire) finished(sql, tag string) {
	verb, rest, _ := strings.Cut(tag, " ")
	switch {
	case verb == "BEGIN" || verb == "START":
		w.inTx, w.writes = true, nil
		return
	case verb == "COMMIT": // "ROLLBACK" when the transaction had failed
		if w.inTx {
			label := strings.Join(w.writes, ", ")
			if label == "" {
				label = "(nothing written)"
			}
			w.commit(label)
		}
		w.inTx, w.writes = false, nil
		return
	case verb == "ROLLBACK":
		w.inTx, w.writes = false, nil
		return
	}
	if wr := written(sql, tag); wr != "" {
		if w.inTx {
			if !slices.Contains(w.writes, wr) {
				w.writes = append(w.writes, wr)
			}
		} else {
			fields := strings.Fields(rest)
			// "INSERT 0 n", "UPDATE n": n rows written; none, no write.
			if len(fields) > 0 && fields[len(fields)-1] != "0" && !slices.Contains(w.implicit, wr) {
				w.implicit = append(w.implicit, wr)
			}
		}
	}
}

// written names what statement sql, finished with tag, writes ("UPDATE
// runs"), "" if it is no INSERT, UPDATE, DELETE or MERGE.
func written(sql, tag string) string {
	verb, _, _ := strings.Cut(tag, " ")
	switch verb {
	case "INSERT", "UPDATE", "DELETE", "MERGE":
	default:
		return ""
	}
	f := strings.Fields(sql)
	for i, w := range f {
		switch strings.ToUpper(w) {
		case "INTO", "UPDATE", "FROM":
			if i+1 < len(f) && (strings.ToUpper(w) != "FROM" || i > 0 && strings.ToUpper(f[i-1]) == "DELETE") {
				return verb + " " + strings.Trim(f[i+1], "(")
			}
		}
	}
	return verb
}

// commit tells of a committed write transaction labelled label.
func (w *wire) commit(label string) {
	if w.committed != nil {
		w.committed(label)
	}
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
