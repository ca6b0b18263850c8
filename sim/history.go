// Package sim is the crashmatrix simulator: it runs the reference service in
// worker processes over a backend, kills them at failpoints, restarts them,
// drives recovery, records a durable history, and checks the invariants.
package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Record is one line of a case's history. Every worker appends to the same
// file with O_APPEND, one write per record, so records of a killed worker
// are never torn and never lost once written (the page cache survives a
// process kill).
type Record struct {
	Worker string `json:"w"`
	Phase  int    `json:"phase"`
	PID    int    `json:"pid,omitempty"`
	// Type: "start", "event", "hit", "model", "action", "result", "exit".
	Type   string           `json:"type"`
	Event  *reference.Event `json:"ev,omitempty"`
	Point  faults.Point     `json:"point,omitempty"`
	Action string           `json:"action,omitempty"`
	// Op is the operationId of a "model" record; Call its ordinal.
	Op     string `json:"op,omitempty"`
	Call   int    `json:"call,omitempty"`
	Detail string `json:"detail,omitempty"`
	Err    string `json:"err,omitempty"`
}

// HistoryWriter appends records to a case's history file.
type HistoryWriter struct {
	mu     sync.Mutex
	f      *os.File
	dead   bool
	mem    *MemHistory
	worker string
	phase  int
}

// MemHistory is an in-memory history shared by the workers of one
// in-process case.
type MemHistory struct {
	mu   sync.Mutex
	recs History
}

// Writer returns a writer appending to h as worker.
func (h *MemHistory) Writer(worker string, phase int) *HistoryWriter {
	return &HistoryWriter{mem: h, worker: worker, phase: phase}
}

// Snapshot returns a copy of the records so far.
func (h *MemHistory) Snapshot() History {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append(History(nil), h.recs...)
}

// OpenHistory opens path for appending as worker.
func OpenHistory(path, worker string, phase int) (*HistoryWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &HistoryWriter{f: f, worker: worker, phase: phase}, nil
}

// Append writes one record with a single write call.
func (h *HistoryWriter) Append(r Record) {
	if h == nil {
		return
	}
	r.Worker, r.Phase = h.worker, h.phase
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
			h.mem.recs = make(History, 0, 128)
		}
		h.mem.recs = append(h.mem.recs, r)
		h.mem.mu.Unlock()
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(fmt.Sprintf("history: %v", err))
	}
	b = append(b, '\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.f.Write(b); err != nil {
		panic(fmt.Sprintf("history: append: %v", err))
	}
}

// kill drops every later record: the in-process mode's simulated process
// died, and what its unwinding goroutine would still report never
// happened.
func (h *HistoryWriter) kill() { h.mu.Lock(); h.dead = true; h.mu.Unlock() }

// Close closes the file.
func (h *HistoryWriter) Close() error {
	if h == nil || h.f == nil {
		return nil
	}
	return h.f.Close()
}

// History is a case's whole history in file order.
type History []Record

// ReadHistory reads a history file. A torn last line (impossible with
// single appends, but a disk may fill up) is reported, not ignored.
func ReadHistory(path string) (History, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var out History
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return out, fmt.Errorf("history %s:%d: %w", path, line, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Events returns the service events in history order.
func (h History) Events() []reference.Event {
	n := 0
	for _, r := range h {
		if r.Type == "event" && r.Event != nil {
			n++
		}
	}
	out := make([]reference.Event, 0, n)
	for _, r := range h {
		if r.Type == "event" && r.Event != nil {
			out = append(out, *r.Event)
		}
	}
	return out
}

// Hits returns the failpoint hits in history order.
func (h History) Hits() []Record {
	var out []Record
	for _, r := range h {
		if r.Type == "hit" {
			out = append(out, r)
		}
	}
	return out
}

// ModelCalls counts model calls per operationId.
func (h History) ModelCalls() map[string]int {
	out := map[string]int{}
	for _, r := range h {
		if r.Type == "model" {
			out[r.Op]++
		}
	}
	return out
}

// fileCallLog is a reference.CallLog shared by every process of a case: one
// file per operationId under dir, one byte appended per call; the ordinal is
// the file's size after the append. Each call is also written to the
// history.
type fileCallLog struct {
	dir  string
	hist *HistoryWriter
}

// memCallLog is the in-process CallLog: shared by the workers of a case,
// it survives their simulated crashes as the harness's file log does.
type memCallLog struct {
	log  *reference.MemoryCallLog
	hist *HistoryWriter
}

func (l *memCallLog) Record(op string) (int, error) {
	n, err := l.log.Record(op)
	if err == nil {
		l.hist.Append(Record{Type: "model", Op: op, Call: n})
	}
	return n, err
}

func (l *fileCallLog) Record(op string) (int, error) {
	name := filepath.Join(l.dir, strings.NewReplacer("/", "_", "\x00", "_").Replace(op))
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Write([]byte{'.'}); err != nil {
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	n := int(st.Size())
	l.hist.Append(Record{Type: "model", Op: op, Call: n})
	return n, nil
}

// Trace renders a history without what legitimately differs between two
// replays of one case (times, process ids, the run's space): two
// deterministic runs have equal traces.
func Trace(h History) []string {
	out := make([]string, 0, len(h))
	for _, r := range h {
		s := r.Worker + " " + r.Type + " " + string(r.Point) + " " + r.Action
		switch r.Type {
		case "event":
			e := r.Event
			if e.Kind == reference.EvLeaseRenew {
				continue // how often a lease is renewed depends on timing
			}
			s += fmt.Sprintf(" %s %s %s %s>%s rev=%d exp=%d tok=%d", e.Kind, e.DocumentID, opShape(e.OperationID), e.From, e.To, e.Revision, e.Expected, e.Token)
		case "model":
			s += fmt.Sprintf(" %s #%d", opShape(r.Op), r.Call)
		case "result":
			s += " " + opShape(r.Detail) + " err=" + boolStr(r.Err != "")
		case "start":
			continue
		}
		out = append(out, s)
	}
	return out
}

// opShape keeps an id's kind but not its space-derived hash.
func opShape(s string) string {
	for _, p := range []string{"ingest-", "retract-", "replan-"} {
		if i := strings.Index(s, p); i >= 0 {
			head := s[:i]
			// A space-scoped id (a loaded initial operation): drop the space.
			if j := strings.LastIndexAny(head, " /"); j >= 0 && head[j] == '/' {
				head = head[:strings.LastIndexByte(head[:j], ' ')+1]
			}
			return head + p + "…"
		}
	}
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func boolStr(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
