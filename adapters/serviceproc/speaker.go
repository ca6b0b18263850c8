package serviceproc

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Speaker is the service's side of the protocol, for a service written in
// Go: it reads the harness's requests and makes the callbacks
// (docs/service-protocol.md, sections 5 to 10). It is an
// reference.Extractor (the model callback), a reference.Observer (events),
// a storeproc.Caller (the harness's stores) and a faults.Injector (the
// crash windows), so the reference service runs over it unchanged.
type Speaker struct {
	mu   sync.Mutex
	r    *bufio.Reader
	w    io.Writer
	id   int64
	step int
	// Exit ends the process at a die answer or when the harness is gone
	// (os.Exit(137) when nil).
	Exit func()
}

// NewSpeaker speaks over r (the harness's lines) and w.
func NewSpeaker(r io.Reader, w io.Writer) *Speaker {
	return &Speaker{r: bufio.NewReaderSize(r, 64<<10), w: w}
}

// Request is one request of the harness.
type Request struct {
	ID   int64           `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

// Next reads the next request; io.EOF at the end of input (stop).
func (s *Speaker) Next() (Request, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		if errors.Is(err, io.EOF) {
			return Request{}, io.EOF
		}
		return Request{}, err
	}
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		return Request{}, fmt.Errorf("a request that is not JSON: %w", err)
	}
	s.id, s.step = req.ID, 0
	return req, nil
}

// Reply answers the request in progress with its result.
func (s *Speaker) Reply(ok any) error {
	return s.send(map[string]any{"id": s.id, "ok": ok})
}

// ReplyError answers the request in progress with an error.
func (s *Speaker) ReplyError(w storeproc.WireError) error {
	return s.send(map[string]any{"id": s.id, "error": w})
}

func (s *Speaker) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = s.w.Write(append(b, '\n'))
	return err
}

// answer is the harness's answer to a callback.
type answer struct {
	ID         int64                `json:"id"`
	Step       int                  `json:"step"`
	Action     string               `json:"action"`
	Retryable  bool                 `json:"retryable"`
	Extraction *Extraction          `json:"extraction"`
	Now        *int64               `json:"now"`
	OK         json.RawMessage      `json:"ok"`
	Error      *storeproc.WireError `json:"error"`
}

// callback sends one callback and waits for its answer. The harness gone
// (end of input) ends the process: nothing after this point may run.
func (s *Speaker) callback(kind string, body map[string]any) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.step++
	body["step"] = s.step
	if err := s.send(map[string]any{"id": s.id, kind: body}); err != nil {
		s.exit()
	}
	line, err := s.r.ReadBytes('\n')
	if err != nil {
		s.exit()
	}
	var a answer
	if err := json.Unmarshal(line, &a); err != nil || a.ID != s.id || a.Step != s.step {
		fmt.Fprintf(os.Stderr, "service speaker: an answer that is not the answer to %s step %d: %s\n", kind, s.step, line)
		s.exit()
	}
	return a
}

func (s *Speaker) exit() {
	if s.Exit != nil {
		s.Exit()
	}
	os.Exit(137)
}

// Eval implements faults.Injector: every window the service passes is
// declared to the harness (at), whose answer says what happens there.
func (s *Speaker) Eval(p faults.Point) (faults.Action, bool) {
	a := s.callback("at", map[string]any{"point": string(p)})
	switch a.Action {
	case "die":
		return faults.Action{Kind: faults.Crash}, true
	case "fail":
		if a.Retryable {
			return faults.Action{Kind: faults.Transient}, true
		}
		return faults.Action{Kind: faults.Permanent}, true
	}
	return faults.Action{}, false
}

// Runtime is a fault runtime over the speaker: its windows are the
// harness's, a crash exits at once.
func (s *Speaker) Runtime() *faults.Runtime {
	return &faults.Runtime{Injector: s, Crash: func(faults.Hit) { s.exit() }}
}

// Extract implements reference.Extractor: the harness's model answers.
func (s *Speaker) Extract(ctx context.Context, req reference.ExtractRequest) (reference.Extraction, error) {
	a := s.callback("model", map[string]any{"space": req.Space, "documentId": req.DocumentID, "operationId": req.OperationID, "content": req.Content})
	if a.Error != nil {
		return reference.Extraction{}, a.Error.Err("model")
	}
	if a.Extraction == nil {
		return reference.Extraction{}, errors.New("the harness answered the model call without an extraction")
	}
	return a.Extraction.Reference(), nil
}

// Now is the harness clock.
func (s *Speaker) Now() int64 {
	a := s.callback("now", map[string]any{})
	if a.Now == nil {
		return 0
	}
	return *a.Now
}

// Sleep waits d on the harness clock.
func (s *Speaker) Sleep(ctx context.Context, d time.Duration) error {
	s.callback("sleep", map[string]any{"millis": d.Milliseconds()})
	return ctx.Err()
}

// Call implements storeproc.Caller: a call to one of the harness's stores.
func (s *Speaker) Call(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error) {
	a := s.callback("store", map[string]any{"op": op, "args": args})
	if a.Error != nil {
		return nil, a.Error.Err(op)
	}
	return a.OK, nil
}

// Observe implements reference.Observer: the service's events.
func (s *Speaker) Observe(e reference.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.send(map[string]any{"id": s.id, "event": e}); err != nil {
		s.exit()
	}
}
