package worker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/reference"
)

// A lock provider whose leases never expire (or are never handed over
// once expired) wedges every document a killed or paused worker held: the
// next worker waits out its acquire timeout, recovery waits it again for
// every operation of every round, and a whole matrix runs for many
// minutes into "hung" and "interrupted" verdicts that say nothing of the
// lease. The harness knows better: it knows when each worker process
// ended, and when a worker stalled at a paused failpoint, and a holder
// that has stopped renews nothing. A refusal by the lease of a stopped
// holder far past the latest instant that lease can have lasted
// (check.DeadHolderBound) is evidence: the worker stops waiting, records
// what it saw (history.SeenDeadHolder, which I7 judges) and fails the
// acquire at once, as a lock timeout (the service leaves the operation to
// recovery instead of dead-lettering it).

// StopLine is one line of a case's stopped-holders file: a worker process
// that ended (the supervisor saw it exit), or that stalled at a pause
// (paused) and went on (resumed); At in Unix milliseconds, like the
// history's times.
type StopLine struct {
	Worker string `json:"w"`
	Phase  int    `json:"phase"`
	PID    int    `json:"pid"`
	What   string `json:"what"` // ended, paused, resumed, granted
	At     int64  `json:"at"`
}

// The stop lines' kinds.
const (
	StopEnded   = "ended"
	stopPaused  = "paused"
	stopResumed = "resumed"
	// stopGranted: a lease fault had the store grant the worker a lease
	// until At, past what the worker believes (a split grant made at the
	// instant another holder's lease expires).
	stopGranted = "granted"
)

// StoppedHoldersFile names the file of a case's folder that lists the
// case's worker processes that ended or paused (StopLine).
const StoppedHoldersFile = "stopped.jsonl"

// Stops is where a case's workers learn which lease holders have
// stopped: a file of the case's folder for worker processes, a map for
// the in-process mode's simulated ones.
type Stops interface {
	// record notes that worker's process pid ended, paused or resumed.
	Record(l StopLine)
	// since says since when the process of holder (a lease holder name,
	// "worker/pid#call") has been stopped, if it is now.
	since(holder string) (int64, bool)
}

// StopFile is the stops of a case of worker processes: one JSON line per
// stop, appended with one write (O_APPEND: lines never interleave).
type StopFile string

func (f StopFile) Record(l StopLine) {
	if f == "" {
		return
	}
	b := appendStopLine(nil, &l)
	out, err := os.OpenFile(string(f), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	_, _ = out.Write(append(b, '\n'))
	_ = out.Close()
}

func (f StopFile) since(holder string) (int64, bool) {
	if f == "" {
		return 0, false
	}
	in, err := os.Open(string(f))
	if err != nil {
		return 0, false
	}
	defer in.Close()
	var m StopMap
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var l StopLine
		// A line being written is skipped: it is read again next time.
		if readStopLine(sc.Bytes(), &l) || json.Unmarshal(sc.Bytes(), &l) == nil {
			m.Record(l)
		}
	}
	return m.since(holder)
}

// appendStopLine appends l as json.Marshal renders it, without
// reflection (TestStopLineIsJSON).
func appendStopLine(b []byte, l *StopLine) []byte {
	b = strictjson.AppendString(append(b, `{"w":`...), l.Worker)
	b = strconv.AppendInt(append(b, `,"phase":`...), int64(l.Phase), 10)
	b = strconv.AppendInt(append(b, `,"pid":`...), int64(l.PID), 10)
	b = strictjson.AppendString(append(b, `,"what":`...), l.What)
	b = strconv.AppendInt(append(b, `,"at":`...), l.At, 10)
	return append(b, '}')
}

// readStopLine reads a line as appendStopLine writes it; anything else
// (false) is json.Unmarshal's.
func readStopLine(b []byte, l *StopLine) bool {
	d := &strictjson.Decoder{B: b}
	var out StopLine
	ok := d.Object(stopLineKeys, func(key string) bool {
		switch key {
		case "w":
			return d.Str(&out.Worker)
		case "phase":
			return d.Int(&out.Phase)
		case "pid":
			return d.Int(&out.PID)
		case "what":
			return d.Str(&out.What)
		}
		return d.Int64(&out.At)
	})
	if !ok || d.I != len(b) {
		return false
	}
	*l = out
	return true
}

var stopLineKeys = strictjson.KeyBits("w", "phase", "pid", "what", "at")

// StopMap is the stops of an in-process case, and what a stop file
// reads into.
type StopMap struct {
	mu sync.Mutex
	// at maps "worker/pid" to the instant it stopped; a process that
	// runs has no entry. granted maps it to the latest store-side expiry
	// of a lease a lease fault granted it (stopGranted).
	at      map[string]int64
	granted map[string]int64
}

func (m *StopMap) Record(l StopLine) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at == nil {
		m.at = map[string]int64{}
	}
	k := fmt.Sprintf("%s/%d", l.Worker, l.PID)
	if l.What == stopGranted {
		if m.granted == nil {
			m.granted = map[string]int64{}
		}
		m.granted[k] = max(m.granted[k], l.At)
		return
	}
	if l.What == stopResumed {
		delete(m.at, k)
		return
	}
	// Ended while paused: stopped since the pause.
	if _, ok := m.at[k]; !ok {
		m.at[k] = l.At
	}
}

func (m *StopMap) since(holder string) (int64, bool) {
	p, _, ok := strings.Cut(holder, "#")
	if !ok || !strings.Contains(p, "/") {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.at[p]
	// A lease a fault granted past the holder's belief lasts until its
	// store-side expiry, as if the holder had stopped only then.
	return max(at, m.granted[p]), ok
}

// deadHolderLocks is the worker's lock provider seen by the harness: a
// refusal by the lease of a holder that has stopped, later than
// check.DeadHolderBound, is recorded and turned into a failed acquire.
type deadHolderLocks struct {
	reference.LockProvider
	w *worker
}

func (d *deadHolderLocks) TryAcquire(ctx context.Context, space, doc, holder string, now, ttl int64) (reference.Lease, bool, error) {
	l, ok, err := d.LockProvider.TryAcquire(ctx, space, doc, holder, now, ttl)
	if err != nil || ok || l.Holder == "" || l.Holder == holder || d.w.stops == nil {
		return l, ok, err
	}
	stopped, dead := d.w.stops.since(l.Holder)
	if !dead || now <= check.DeadHolderBound(stopped, d.w.spec.LeaseTTLMillis) {
		return l, ok, err
	}
	d.w.seen(history.Observation{What: history.SeenDeadHolder, Doc: doc, Holder: l.Holder, Token: l.Token, Until: l.ExpiresAt,
		Now: now, Stopped: stopped, TTL: d.w.spec.LeaseTTLMillis})
	return l, false, fmt.Errorf("%w: %s's lease on %s/%s (token %d) still refuses at %d, %s after that holder stopped: the lock provider did not hand over an expired lease",
		reference.ErrLockTimeout, l.Holder, space, doc, l.Token, now, time.Duration(now-stopped)*time.Millisecond)
}

// pausing wraps a worker's pause so that the case's stops know it stalls:
// nothing of the worker runs (nor renews a lease) until it goes on.
func pausing(st Stops, spec WorkerSpec, pid int, pause func(context.Context, time.Duration), now func() int64) func(context.Context, time.Duration) {
	if st == nil {
		return pause
	}
	return func(ctx context.Context, d time.Duration) {
		st.Record(StopLine{Worker: spec.Worker, Phase: spec.Phase, PID: pid, What: stopPaused, At: now()})
		pause(ctx, d)
		st.Record(StopLine{Worker: spec.Worker, Phase: spec.Phase, PID: pid, What: stopResumed, At: now()})
	}
}
