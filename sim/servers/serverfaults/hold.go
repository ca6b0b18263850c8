package serverfaults

import (
	"sync"
	"sync/atomic"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// ToxicHold is the toxic of the faults that hold a worker's request past
// its lease (server-pause, partition, clock-jump). It tells the links open
// when it was armed (the faulted worker's connections: the next step's
// worker starts after the fault is armed) from the links opened since (the
// worker that takes the lease over). On the first it notes the worker's
// next request (upstream) and, for a partition, holds everything that
// comes either way until the partition heals, then passes it on in order
// (for the other two, the server's replies only: the holder stays parked
// until the worker that takes over is done, as a paused worker does); on
// the others it notes a committed write (downstream: another worker
// reached the server and committed while the holder waited).
const ToxicHold = "crashmatrix_hold"

func init() { toxics.Register(ToxicHold, new(HoldToxic)) }

// hold is one armed hold: what its toxics saw, and the gate a partition
// waits at.
type hold struct {
	// adding is set while the toxics are added to the proxy's links: a
	// link whose state is made then was open when the fault was armed.
	adding atomic.Bool
	// cutUp, cutDown: the held links pass nothing that way until healed.
	// A partition holds both from the window on; a server-pause or a
	// clock jump lets the worker's next request and its reply through,
	// then holds what the worker sends after it (cutUp set then).
	cutUp, cutDown atomic.Bool

	healOnce sync.Once
	healed   chan struct{}

	mu sync.Mutex
	// sent closes at the first request on a held link after arming.
	sent      chan struct{}
	sentBytes int
	// otherCommit closes at the first committed write on a link opened
	// since arming.
	otherCommit chan struct{}
	commitWhat  string
	// heldChunks and heldBytes count what was held; held closes at the
	// first chunk held.
	heldChunks, heldBytes int
	held                  chan struct{}
	// links counts the links open when the fault was armed.
	links int
}

func (h *hold) armedLinks() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.links
}

func (h *hold) sentLen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sentBytes
}

func (h *hold) otherWhat() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.commitWhat
}

func (h *hold) heldCount() (chunks, bytes int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.heldChunks, h.heldBytes
}

func newHold(cutUp, cutDown bool) *hold {
	h := &hold{healed: make(chan struct{}), sent: make(chan struct{}), otherCommit: make(chan struct{}), held: make(chan struct{})}
	h.cutUp.Store(cutUp)
	h.cutDown.Store(cutDown)
	return h
}

// heal opens a partition's gate (once).
func (h *hold) heal() { h.healOnce.Do(func() { close(h.healed) }) }

func (h *hold) isHealed() bool {
	select {
	case <-h.healed:
		return true
	default:
		return false
	}
}

// noteSent records a request on a held link.
func (h *hold) noteSent(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.sent:
	default:
		h.sentBytes = n
		close(h.sent)
	}
}

// noteHeld counts a chunk a partition held.
func (h *hold) noteHeld(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.heldChunks == 0 {
		close(h.held)
	}
	h.heldChunks++
	h.heldBytes += n
}

// noteOtherCommit records a committed write on another link.
func (h *hold) noteOtherCommit(what string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-h.otherCommit:
	default:
		h.commitWhat = what
		close(h.otherCommit)
	}
}

// holds are the armed holds (see registry).
var holds = &registry[hold]{prefix: "hold"}

// HoldToxic is ToxicHold on one direction of a proxy's links.
type HoldToxic struct {
	Hold string `json:"hold"`
	// Upstream is set on the toxic of the client -> server direction.
	Upstream bool `json:"upstream"`
	// Protocol is the wire protocol of the server ("postgres", "bolt"),
	// to find committed writes in the replies of the other links.
	Protocol string `json:"protocol"`
	// Links says which links are the faulted worker's: those open when
	// the toxic was added (linksAtArming, on the case's proxy), every one
	// (linksAll, on the worker's own proxy), or none (linksNone, the
	// case's proxy beside the worker's own: only its commits are noted).
	Links string `json:"links,omitempty"`
}

// The HoldToxic.Links values.
const (
	linksAtArming = ""
	linksAll      = "all"
	linksNone     = "none"
)

// holdState is one link's view.
type holdState struct {
	// armedOn: the link was open when the fault was armed.
	armedOn bool
	held    []*stream.StreamChunk
	closed  bool
	replies ackLostState
}

// NewState implements toxics.StatefulToxic: toxiproxy makes a link's state
// when the toxic is added to the links open then (under the proxy's lock,
// while the hold is adding) and when a link opens later.
func (t *HoldToxic) NewState() interface{} {
	h := holds.find(t.Hold)
	armed := h != nil && (t.Links == linksAll || t.Links == linksAtArming && h.adding.Load())
	if armed && t.Upstream {
		h.mu.Lock()
		h.links++
		h.mu.Unlock()
	}
	return &holdState{armedOn: armed}
}

// Pipe implements toxics.Toxic.
func (t *HoldToxic) Pipe(stub *toxics.ToxicStub) {
	st := stub.State.(*holdState)
	h := holds.find(t.Hold)
	flush := func() {
		for _, c := range st.held {
			stub.Output <- c
		}
		st.held = nil
	}
	cut := func() bool {
		if h == nil || !st.armedOn || h.isHealed() {
			return false
		}
		if t.Upstream {
			return h.cutUp.Load()
		}
		return h.cutDown.Load()
	}
	var healed <-chan struct{}
	if h != nil {
		healed = h.healed
	}
	for {
		if st.closed {
			// The client gave up while held: what it sent arrives once
			// the hold heals, then its close.
			if cut() {
				select {
				case <-stub.Interrupt:
					flush()
					return
				case <-h.healed:
				}
			}
			flush()
			stub.Close()
			return
		}
		select {
		case <-stub.Interrupt:
			flush()
			return
		case <-healed:
			healed = nil
			flush()
		case c := <-stub.Input:
			if c == nil {
				if len(st.held) == 0 {
					stub.Close()
					return
				}
				st.closed = true
				continue
			}
			switch {
			case cut():
				st.held = append(st.held, c)
				h.noteHeld(len(c.Data))
				if t.Upstream {
					h.noteSent(len(c.Data))
				}
				continue
			case len(st.held) > 0:
				// Healed meanwhile: what was held goes first.
				flush()
			}
			if h != nil {
				switch {
				case st.armedOn && t.Upstream:
					h.noteSent(len(c.Data))
				case !st.armedOn && !t.Upstream:
					if what := st.replies.committed(t.Protocol, c.Data); what != "" {
						h.noteOtherCommit(what)
					}
				}
			}
			stub.Output <- c
		}
	}
}
