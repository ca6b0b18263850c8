package serverfaults

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/Shopify/toxiproxy/v2/toxics"
	"github.com/rs/zerolog"
)

// The fault proxy is Shopify's toxiproxy, embedded: every server gets a
// stable proxy (the endpoint that stays the same across restarts) and
// every case run a proxy of its own per server, so that a fault armed for
// one case never touches another's connections. Two toxics of ours ride on
// toxiproxy's toxic chain: both fire once, on the first matching traffic
// after they are armed, and report it.
const (
	// ToxicAckLost drops the reply that completes a committed write and
	// cuts the connection (downstream).
	ToxicAckLost = "crashmatrix_ack_lost"
	// ToxicConnReset cuts the connection on the first request that comes
	// after it is armed, before the request reaches the server (upstream).
	ToxicConnReset = "crashmatrix_conn_reset"
)

func init() {
	toxics.Register(ToxicAckLost, new(AckLostToxic))
	toxics.Register(ToxicConnReset, new(ConnResetToxic))
}

// latch is one armed fault: it fires once, and tells its owner.
type latch struct {
	fired  atomic.Bool
	onFire func(detail string)
}

// fire reports whether this call fired the latch (the first one does).
func (l *latch) fire(detail string) bool {
	if l == nil || !l.fired.CompareAndSwap(false, true) {
		return false
	}
	if l.onFire != nil {
		l.onFire(detail)
	}
	return true
}

// registry maps the ids a toxic's JSON attributes name to what armed it:
// toxiproxy builds toxics from JSON attributes, so a toxic finds its latch
// or hold (and through it the case that armed it) by id; ids are unique
// per process.
type registry[T any] struct {
	prefix string
	mu     sync.Mutex
	m      map[string]*T
	seq    atomic.Int64
}

func (r *registry[T]) add(v *T) string {
	id := fmt.Sprintf("%s-%d", r.prefix, r.seq.Add(1))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*T{}
	}
	r.m[id] = v
	return id
}

func (r *registry[T]) drop(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

func (r *registry[T]) find(id string) *T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[id]
}

// latches are the armed latches.
var latches = &registry[latch]{prefix: "latch"}

func newLatch(onFire func(string)) (string, *latch) {
	l := &latch{onFire: onFire}
	return latches.add(l), l
}

func dropLatch(id string) { latches.drop(id) }

func findLatch(id string) *latch { return latches.find(id) }

// AckLostToxic watches the server's replies and, on the first one that
// completes a committed write, drops it and closes the connection: the
// write committed, the client never learns it. Protocol is "postgres"
// (the reply ends with ReadyForQuery, idle, after INSERT/UPDATE/DELETE/
// COMMIT) or "bolt" (a SUCCESS carrying a bookmark: Neo4j's answer to a
// committed transaction).
type AckLostToxic struct {
	Latch    string `json:"latch"`
	Protocol string `json:"protocol"`
}

// ackLostState follows one connection's reply stream.
type ackLostState struct {
	pg   pgReplies
	tail []byte // the end of the previous chunk (a bookmark split across reads)
}

// NewState implements toxics.StatefulToxic.
func (t *AckLostToxic) NewState() interface{} { return &ackLostState{} }

// Pipe implements toxics.Toxic.
func (t *AckLostToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*ackLostState)
	l := findLatch(t.Latch)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if l != nil && !l.fired.Load() {
				if what := st.commits(t.Protocol, c.Data); what != "" && l.fire(what) {
					stub.Close() // the reply is dropped and the client's connection closed
					return
				}
			}
			stub.Output <- c
		}
	}
}

// commits says which committed write the chunk completes, as the note of
// the reply ack-lost drops ("" if none).
func (st *ackLostState) commits(protocol string, data []byte) string {
	what := st.committed(protocol, data)
	switch {
	case what == "":
		return ""
	case protocol == "bolt":
		return "the reply to a committed Neo4j transaction (SUCCESS with its bookmark) was dropped and the connection closed"
	}
	return fmt.Sprintf("the reply to a committed PostgreSQL write (%s, then ReadyForQuery idle) was dropped and the connection closed", what)
}

// committed says which committed write the chunk of replies completes:
// the PostgreSQL write's tag, or "a Neo4j transaction's SUCCESS with its
// bookmark" ("" if none).
func (st *ackLostState) committed(protocol string, data []byte) string {
	if protocol == "bolt" {
		// PackStream: tiny string "bookmark" (marker 0x88) in a SUCCESS.
		buf := append(st.tail, data...)
		found := bytes.Contains(buf, []byte("\x88bookmark"))
		st.tail = append(st.tail[:0], buf[max(0, len(buf)-9):]...)
		if found {
			return "a Neo4j transaction's SUCCESS with its bookmark"
		}
		return ""
	}
	return st.pg.feed(data)
}

// pgReplies follows the PostgreSQL backend protocol (type byte, int32
// length including itself, body) across chunk boundaries.
type pgReplies struct {
	started bool
	hdr     []byte // a partial header
	typ     byte
	left    int    // body bytes still to come
	body    []byte // the body so far, for CommandComplete and ReadyForQuery
	wrote   string // the write tag seen since the last idle ReadyForQuery
}

// feed consumes a chunk of server output and returns the tag of the write
// whose transaction an idle ReadyForQuery in it completed ("" if none).
func (p *pgReplies) feed(data []byte) string {
	if !p.started {
		p.started = true
		// The one-byte answer to an SSL or GSS encryption request has no
		// framing.
		if len(data) == 1 && (data[0] == 'N' || data[0] == 'S' || data[0] == 'G') {
			return ""
		}
	}
	done := ""
	for len(data) > 0 {
		if p.left == 0 && p.typ == 0 {
			need := 5 - len(p.hdr)
			n := min(need, len(data))
			p.hdr = append(p.hdr, data[:n]...)
			data = data[n:]
			if len(p.hdr) < 5 {
				break
			}
			p.typ = p.hdr[0]
			p.left = int(binary.BigEndian.Uint32(p.hdr[1:5])) - 4
			p.hdr = p.hdr[:0]
			p.body = p.body[:0]
		}
		n := min(p.left, len(data))
		if p.typ == 'C' || p.typ == 'Z' {
			p.body = append(p.body, data[:n]...)
		}
		data = data[n:]
		p.left -= n
		if p.left > 0 {
			break
		}
		switch p.typ {
		case 'C': // CommandComplete: a NUL-terminated tag
			tag := strings.TrimRight(string(p.body), "\x00")
			verb, _, _ := strings.Cut(tag, " ")
			switch verb {
			case "INSERT", "UPDATE", "DELETE", "MERGE":
				p.wrote = tag
			case "COMMIT":
				if p.wrote != "" {
					p.wrote = "COMMIT after " + p.wrote
				}
			case "ROLLBACK":
				p.wrote = ""
			}
		case 'Z': // ReadyForQuery: I idle, T in a transaction, E failed one
			if len(p.body) == 1 && p.body[0] == 'I' {
				if p.wrote != "" && done == "" {
					done = p.wrote
				}
				p.wrote = ""
			}
		}
		p.typ = 0
	}
	return done
}

// ConnResetToxic closes the connection, once, on the first request that
// comes through after it is armed; the request is dropped, so it never
// reaches the server.
type ConnResetToxic struct {
	Latch string `json:"latch"`
}

// Pipe implements toxics.Toxic.
func (t *ConnResetToxic) Pipe(stub *toxics.ToxicStub) {
	l := findLatch(t.Latch)
	for {
		select {
		case <-stub.Interrupt:
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if l.fire(fmt.Sprintf("the connection was cut before a %d-byte request reached the server", len(c.Data))) {
				stub.Close()
				return
			}
			stub.Output <- c
		}
	}
}

// newToxiproxy starts an embedded toxiproxy with no HTTP API (the
// supervisor drives it in-process) and no logging.
func newToxiproxy() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
}
