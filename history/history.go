// Package history holds the records a case's workers append while they run
// (what each worker set out to do, what the service reported, which fault
// fired, what each call returned) and the readers the supervisor, the
// invariant checkers and the reports share. It is a leaf: it imports only
// the protocol's records and the fault catalogue.
package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Kind says what a Record reports.
type Kind string

// The record kinds.
const (
	// Start: a worker process (or simulated process) began; Actions counts
	// what it was given.
	Start Kind = "start"
	// Event: the service reported a protocol step (Event).
	Event Kind = "event"
	// Hit: an armed fault fired at Point (Fault), before it acted.
	Hit Kind = "hit"
	// Model: the model was called for Op; Call is the ordinal over the case.
	Model Kind = "model"
	// Action: the worker is about to run action Index (Do, Op, Doc, Thread).
	Action Kind = "action"
	// Result: action Index returned (Result, Err).
	Result Kind = "result"
	// Exit: the worker finished (Reason) without being killed; Micros is
	// its run time.
	Exit Kind = "exit"
	// Seen: the harness itself saw something at the boundary of the
	// system under test (Seen): an intent, a model answer, a frozen plan,
	// a commit, a graph write, a claim, a plan save (observation.go).
	Seen Kind = "seen"
	// Server: the supervisor carried out the server fault (Fault) that the
	// worker hit at Point: Note says what happened (a restart and how
	// long it took, a reply dropped), Err that it could not.
	Server Kind = "server"
	// Reach: the worker passed a window a store declared in its own code
	// (faults.At) at Point, from the store function Method; armed or not.
	Reach Kind = "reach"
	// Kill: a random-instant kill fired Micros into the worker's run.
	Kill Kind = "kill"
	// Torn: the record a worker was writing when it was killed; only its
	// first bytes reached the file (Note holds them). Never written: Read
	// makes it of what it finds, so a report can show where a record was
	// cut short. Worker and Phase are the torn record's when its first
	// bytes name them (Worker "" and Phase -1 when they do not).
	Torn Kind = "torn"
)

// Outcome is what an action returned, typed, so nothing parses it back.
type Outcome struct {
	// Op is the operationId (System A) or operation_id (System B) the call
	// worked on.
	Op string `json:"op,omitempty"`
	// Outcome is the service's outcome word (reference.Outcome) or, for a
	// plan-save conflict, "conflict-refused".
	Outcome string `json:"outcome,omitempty"`
	// Revision is the document revision the call left.
	Revision int64 `json:"rev,omitempty"`
	// Status, Next and PlanID are a System B checkpoint's fields.
	Status string `json:"status,omitempty"`
	Next   string `json:"next,omitempty"`
	PlanID int64  `json:"plan,omitempty"`
	// Rounds and Quiet are a recovery run's.
	Rounds int  `json:"rounds,omitempty"`
	Quiet  bool `json:"quiet,omitempty"`
}

// Record is one line of a case's history. Every worker appends to the same
// file with O_APPEND, one write per record, so records never interleave and
// are never lost once written (the page cache survives a process kill).
// A record can be torn, though: Linux stops a write to a file at a page
// boundary when SIGKILL arrives, so a worker killed in the middle of an
// append leaves the record's first bytes, and the next record appended
// continues that line. Read gives such a record as a Torn one.
type Record struct {
	Worker string `json:"w"`
	Phase  int    `json:"phase"`
	PID    int    `json:"pid,omitempty"`
	Kind   Kind   `json:"type"`
	// At is when the record was written, in milliseconds like the
	// reference's event times (Unix time in a worker process, the simulated
	// clock in the in-process mode).
	At    int64            `json:"at,omitempty"`
	Event *reference.Event `json:"ev,omitempty"`
	// Point and Fault are a Hit's.
	Point faults.Point   `json:"point,omitempty"`
	Fault *faults.Action `json:"fault,omitempty"`
	// Index, Do, Op, Doc, Thread are an Action's (Index and Do also a
	// Result's); Actions is a Start's count.
	Index   int    `json:"i,omitempty"`
	Do      string `json:"do,omitempty"`
	Op      string `json:"op,omitempty"`
	Doc     string `json:"doc,omitempty"`
	Thread  string `json:"thread,omitempty"`
	Actions int    `json:"actions,omitempty"`
	// Call is a Model record's ordinal.
	Call   int      `json:"call,omitempty"`
	Result *Outcome `json:"res,omitempty"`
	Err    string   `json:"err,omitempty"`
	// Reason is an Exit's.
	Reason string `json:"reason,omitempty"`
	// Obs is a Seen record's observation.
	Obs *Observation `json:"obs,omitempty"`
	// Note is a Server record's account of what was done to the server.
	Note string `json:"note,omitempty"`
	// Method is a Reach's store function.
	Method string `json:"method,omitempty"`
	// Micros is the worker's run time at an Exit or a Kill, in
	// microseconds; Since is a Kill's delay after the worker's previous
	// record (what a replay of the kill waits after that record).
	Micros int64 `json:"us,omitempty"`
	Since  int64 `json:"since,omitempty"`
	// Calls and Commits are an Exit's and a Result's: how many store calls
	// the worker had made by then outside fenced steps (faults.StoreCall)
	// and how many write transactions of its embedded database it had
	// committed (faults.StoreCommit, a worker process only): the instants
	// a random kill is drawn over, and what each action took of them.
	Calls   int `json:"calls,omitempty"`
	Commits int `json:"commits,omitempty"`
}

// Writer appends records to a case's history as one worker.
type Writer struct {
	mu     sync.Mutex
	f      *os.File
	dead   bool
	mem    *Mem
	worker string
	phase  int
	now    func() int64
	// observe, when set, sees every record this writer appended.
	observe func(Record)
}

// Observe has f called with every record h appends from now on, after it
// is written (a replayed random kill waits for its anchor record).
func (h *Writer) Observe(f func(Record)) { h.mu.Lock(); h.observe = f; h.mu.Unlock() }

// Mem is an in-memory history shared by the workers of one in-process
// case.
type Mem struct {
	mu   sync.Mutex
	recs Log
}

// Writer returns a writer appending to h as worker; now stamps the records
// (nil: no time).
func (h *Mem) Writer(worker string, phase int, now func() int64) *Writer {
	return &Writer{mem: h, worker: worker, phase: phase, now: now}
}

// Snapshot returns the records so far. It shares them with h, which
// only ever appends: capped at its length, the result sees none of the
// records appended later and cannot append into h's own. (A copy was an
// eighth of what an in-process exploration allocated.)
func (h *Mem) Snapshot() Log {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.recs[:len(h.recs):len(h.recs)]
}

// Open opens path for appending as worker; now stamps the records.
func Open(path, worker string, phase int, now func() int64) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Writer{f: f, worker: worker, phase: phase, now: now}, nil
}

// Append writes one record with a single write call.
func (h *Writer) Append(r Record) {
	if h == nil {
		return
	}
	r.Worker, r.Phase = h.worker, h.phase
	if h.now != nil && r.At == 0 {
		r.At = h.now()
	}
	h.mu.Lock()
	observe := h.observe
	h.mu.Unlock()
	if observe != nil {
		defer observe(r)
	}
	if h.mem != nil {
		h.mu.Lock()
		dead := h.dead
		h.mu.Unlock()
		if dead {
			return
		}
		if r.Event != nil {
			e := *r.Event
			r.Event = &e
		}
		h.mem.mu.Lock()
		if h.mem.recs == nil {
			h.mem.recs = make(Log, 0, 128)
		}
		h.mem.recs = append(h.mem.recs, r)
		h.mem.mu.Unlock()
		return
	}
	b, err := appendRecord(make([]byte, 0, 512), &r)
	if err != nil {
		panic(fmt.Sprintf("history: %v", err))
	}
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.dead {
		return
	}
	if _, err := h.f.Write(b); err != nil {
		panic(fmt.Sprintf("history: append: %v", err))
	}
}

// Kill drops every later record: the in-process mode's simulated process
// died, and what its unwinding goroutine would still report never
// happened; a worker process is about to kill itself, and no goroutine of
// it starts an append the kill could tear. An append in progress ends
// before Kill returns.
func (h *Writer) Kill() { h.mu.Lock(); h.dead = true; h.mu.Unlock() }

// Close closes the file.
func (h *Writer) Close() error {
	if h == nil || h.f == nil {
		return nil
	}
	return h.f.Close()
}

// Log is a case's whole history in file order.
type Log []Record

// Read reads a history file. A record torn by its worker's kill (see
// Record) is given as a Torn record where it was; a torn record whose
// worker wrote on after it, or a line that is not records, is an error
// naming the file and line: a killed worker writes nothing more, so that is
// a damaged file, not a kill.
func Read(path string) (Log, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	// The file is in memory already: its lines are cut from it as they
	// are (a bufio.Scanner would copy each into a buffer of its own, and
	// the megabyte it needs for a long line cost more than the parse on
	// every read of a case's history).
	out := make(Log, 0, bytes.Count(b, []byte{'\n'})+1)
	line := 0
	torn := map[int]int{} // index in out -> line
	for len(b) > 0 {
		line++
		l := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			l, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		l = bytes.TrimSuffix(l, []byte{'\r'})
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		recs, err := parseLine(l)
		if err != nil {
			return out, fmt.Errorf("history %s:%d: %w", path, line, err)
		}
		for _, r := range recs {
			if r.Kind == Torn {
				torn[len(out)] = line
			}
			out = append(out, r)
		}
	}
	for i, line := range torn {
		t := out[i]
		if t.Worker == "" {
			continue
		}
		for _, r := range out[i+1:] {
			// The server supervisor writes Server records under the name
			// of the worker whose fault it carried out, maybe after the
			// worker died.
			if r.Worker == t.Worker && r.Phase == t.Phase && r.Kind != Server {
				return out, fmt.Errorf("history %s:%d: a record of worker %s (phase %d) is cut short, yet the worker wrote on after it (a %s record): the file is damaged, not torn by a kill", path, line, t.Worker, t.Phase, r.Kind)
			}
		}
	}
	if len(out) == 0 {
		return nil, nil // as before: no records, no slice
	}
	return out, nil
}

// recordStart is how every record's JSON begins (Worker is its first field,
// never omitted). Inside a JSON string a quote is escaped, so these bytes
// mark the start of a record wherever they are.
var recordStart = []byte(`{"w":"`)

// parseLine parses a line of a history: one record, or a torn record and
// the records appended after it on the same line.
func parseLine(b []byte) (Log, error) { return parseSuffix(b, map[int]bool{}) }

// parseSuffix is parseLine of b, the end of a line; bad holds the lengths
// of the line's ends known not to parse, so that each is tried once (a
// damaged line with many record starts would otherwise take time
// exponential in their number).
func parseSuffix(b []byte, bad map[int]bool) (Log, error) {
	var r Record
	if decodeRecord(b, &r) {
		return Log{r}, nil
	}
	err := json.Unmarshal(b, &r)
	if err == nil {
		return Log{r}, nil
	}
	for k := 1; k < len(b); k++ {
		j := bytes.Index(b[k:], recordStart)
		if j < 0 {
			break
		}
		k += j
		if bad[len(b)-k] {
			continue
		}
		rest, err := parseSuffix(b[k:], bad)
		if err != nil {
			bad[len(b)-k] = true
			continue
		}
		var whole Record
		if json.Unmarshal(b[:k], &whole) == nil {
			// Cut exactly before its newline: the record is whole.
			return append(Log{whole}, rest...), nil
		}
		if t, ok := tornRecord(b[:k]); ok {
			return append(Log{t}, rest...), nil
		}
		break
	}
	if t, ok := tornRecord(b); ok {
		return Log{t}, nil
	}
	return nil, err
}

// tornHead matches the worker and phase at the start of a record
// (compiled on first use: a worker process writes records, never reads a
// torn one).
var tornHead = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^\{"w":("(?:[^"\\]|\\.)*"),"phase":(\d+)[,}]`)
})

// tornRecord reports whether b is the first bytes of a record (JSON that
// ends before its value does) and returns it as a Torn record.
func tornRecord(b []byte) (Record, bool) {
	if !bytes.HasPrefix(b, recordStart) && !bytes.HasPrefix(recordStart, b) {
		return Record{}, false
	}
	var v any
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&v); err != io.ErrUnexpectedEOF {
		return Record{}, false
	}
	t := Record{Kind: Torn, Phase: -1, Note: string(b)}
	if m := tornHead().FindSubmatch(b); m != nil {
		var w string
		phase, err := strconv.Atoi(string(m[2]))
		if json.Unmarshal(m[1], &w) == nil && err == nil {
			t.Worker, t.Phase = w, phase
		}
	}
	return t, true
}

// Events returns the service events in history order.
func (h Log) Events() []reference.Event {
	n := 0
	for _, r := range h {
		if r.Kind == Event && r.Event != nil {
			n++
		}
	}
	out := make([]reference.Event, 0, n)
	for _, r := range h {
		if r.Kind == Event && r.Event != nil {
			out = append(out, *r.Event)
		}
	}
	return out
}

// Hits returns the failpoint hits in history order.
func (h Log) Hits() []Record {
	var out []Record
	for _, r := range h {
		if r.Kind == Hit {
			out = append(out, r)
		}
	}
	return out
}

// HitBy reports whether worker's fault at p fired.
func (h Log) HitBy(worker string, p faults.Point) bool {
	for _, r := range h {
		if r.Kind == Hit && r.Worker == worker && r.Point == p {
			return true
		}
	}
	return false
}

// ModelCalls counts model calls per operationId.
func (h Log) ModelCalls() map[string]int {
	out := map[string]int{}
	for _, r := range h {
		if r.Kind == Model {
			out[r.Op]++
		}
	}
	return out
}

// Trace renders a history without what legitimately differs between two
// replays of one case (times, process ids, the run's space): two
// deterministic runs have equal traces.
func Trace(h Log) []string {
	out := make([]string, 0, len(h))
	for _, r := range h {
		s := r.Worker + " " + string(r.Kind) + " " + string(r.Point)
		switch r.Kind {
		case Event:
			e := r.Event
			if e.Kind == reference.EvLeaseRenew {
				continue // how often a lease is renewed depends on timing
			}
			s += fmt.Sprintf(" %s %s %s %s>%s rev=%d exp=%d tok=%d", e.Kind, e.DocumentID, opShape(e.OperationID), e.From, e.To, e.Revision, e.Expected, e.Token)
		case Hit:
			if r.Fault != nil {
				s += " " + r.Fault.String()
			}
		case Model:
			s += fmt.Sprintf(" %s #%d", opShape(r.Op), r.Call)
		case Action:
			s += fmt.Sprintf(" #%d %s %s", r.Index, r.Do, opShape(r.Op))
		case Result:
			s += fmt.Sprintf(" #%d %s", r.Index, r.Do)
			if r.Result != nil {
				s += " " + opShape(r.Result.Op) + " " + r.Result.Outcome + " " + r.Result.Status
			}
			s += " err=" + boolStr(r.Err != "")
		case Start, Torn:
			// Whether a kill tears the record being written depends on
			// the instant.
			continue
		}
		out = append(out, s)
	}
	return out
}

// opShape keeps an id's kind but not its space-derived hash, nor the
// space a scenario's (or a loaded initial) operationId is scoped to.
func opShape(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	for _, p := range []string{"ingest-", "retract-", "replan-"} {
		if i := strings.Index(s, p); i >= 0 {
			return s[:i] + p + "…"
		}
	}
	return s
}

func boolStr(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
