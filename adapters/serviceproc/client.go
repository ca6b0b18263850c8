package serviceproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
)

// Options say which command to start and how to greet it.
type Options struct {
	// Command is the service's command line, split like a shell does.
	Command string
	// WorkDir is the directory it runs in ("" = the current one).
	WorkDir string
	// LogDir, when set, gets each process's whole stderr as
	// service-<pid>.log; TempDir is its TMPDIR (tmp beside Hello.Dir when
	// empty).
	LogDir, TempDir string
	// Hello is what the process is greeted with (Protocol is set here).
	Hello Hello
	// Timeout bounds the silence of the service within a request (10 s if
	// zero), HelloTimeout its start (60 s if zero).
	Timeout, HelloTimeout time.Duration
	// Want, when set, is what the run's first process declared: this one
	// must declare the same.
	Want *Declared
	// OnProtocolError is told every protocol violation before the call
	// returns it (a worker ends itself there: the case is undecided).
	OnProtocolError func(ctx context.Context, err *storeproc.ProtocolError)
	// RetryStart, when set, makes a start that got no hello within
	// HelloTimeout start once more (a start slowed by the machine's load):
	// it is told of the first attempt's error as the second begins (to
	// count and report it), and OnProtocolError is not. A second start
	// that gets no hello either is the protocol error, as without it: a
	// service that never answers stays one.
	RetryStart func(first *storeproc.ProtocolError)
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 10 * time.Second
}

func (o Options) helloTimeout() time.Duration {
	if o.HelloTimeout > 0 {
		return o.HelloTimeout
	}
	return storeproc.DefaultHelloTimeout
}

// Service is one running service process, greeted. Its methods are not
// safe for concurrent use: one request at a time, as the protocol says.
type Service struct {
	opts   Options
	p      *storeproc.Process
	decl   Declared
	nextID int64
	broken bool
}

// Start starts the service process and greets it (hello). A process that
// exits, answers wrongly or not in time is a *storeproc.ProtocolError
// naming the command and its stderr. With Options.RetryStart, a start that
// got no hello in time is tried once more.
func Start(ctx context.Context, opts Options) (*Service, error) {
	if opts.RetryStart == nil {
		return start(ctx, opts)
	}
	first := opts
	first.OnProtocolError = func(ctx context.Context, e *storeproc.ProtocolError) {
		if !e.NoStart && opts.OnProtocolError != nil {
			opts.OnProtocolError(ctx, e)
		}
	}
	s, err := start(ctx, first)
	var pe *storeproc.ProtocolError
	if err == nil || !errors.As(err, &pe) || !pe.NoStart || ctx.Err() != nil {
		if pe != nil && pe.NoStart && opts.OnProtocolError != nil {
			opts.OnProtocolError(ctx, pe) // cancelled: no second start
		}
		return s, err
	}
	opts.RetryStart(pe)
	return start(ctx, opts)
}

func start(ctx context.Context, opts Options) (*Service, error) {
	opts.Hello.Protocol = Protocol
	if opts.Hello.Bugs == nil {
		opts.Hello.Bugs = []string{}
	}
	env := []string{EnvDir + "=" + opts.Hello.Dir, EnvNamespace + "=" + opts.Hello.Namespace}
	tmp := opts.TempDir
	if tmp == "" {
		tmp = filepath.Join(filepath.Dir(filepath.Clean(opts.Hello.Dir)), "tmp")
	}
	p, err := storeproc.StartProcess(storeproc.ProcessOptions{Command: opts.Command, WorkDir: opts.WorkDir, Dir: opts.Hello.Dir, LogDir: opts.LogDir,
		TempDir: tmp, LogName: "service", Env: env})
	s := &Service{opts: opts, p: p}
	if err != nil {
		return nil, s.violation(ctx, "start", "the service process could not be started: "+err.Error(), "")
	}
	var d Declared
	if err := s.request(ctx, "hello", opts.Hello, nil, &d, opts.helloTimeout()); err != nil {
		var refused *IntentError
		if errors.As(err, &refused) {
			// A service that will not serve this hello (another protocol,
			// a mutant it does not know) cannot be run at all.
			return nil, s.violation(ctx, describe(0, "hello", opts.Hello), "the service refused hello: "+refused.Code+": "+refused.Message, "")
		}
		s.Kill()
		return nil, err
	}
	problem := d.check()
	if problem == "" && opts.Want != nil {
		problem = opts.Want.Same(d)
	}
	if problem != "" {
		return nil, s.violation(ctx, describe(0, "hello", opts.Hello), problem, "")
	}
	s.decl = d
	return s, nil
}

// Declared is what the service declared in hello.
func (s *Service) Declared() Declared { return s.decl }

// Broken reports whether the process was killed or broke the protocol:
// it serves no further request.
func (s *Service) Broken() bool { return s.broken }

// Close stops the process: stdin closed, 5 s to exit, then SIGKILL.
func (s *Service) Close() error {
	if s.p != nil {
		s.p.Stop()
	}
	return nil
}

// Kill kills the process's group at once.
func (s *Service) Kill() {
	s.broken = true
	if s.p != nil {
		s.p.Kill()
	}
}

// Handler answers the callbacks of a request (docs/service-protocol.md,
// sections 6 to 10); the crash windows (at) are answered through the
// faults.Runtime in the request's context, as a store's are.
type Handler interface {
	// Model answers a model call.
	Model(ctx context.Context, req ModelRequest) (reference.Extraction, error)
	// Now is the harness clock; Sleep waits millis on it and returns the
	// time then.
	Now() int64
	Sleep(ctx context.Context, millis int64) int64
	// Store runs a store protocol request on a harness store.
	Store(ctx context.Context, op string, args json.RawMessage) (any, error)
	// Call is a call to one of the service's own stores: run lets it
	// happen and returns what the service reported of it (done); Call
	// returns without running it to fail it (its error says whether a
	// retry may help), or never returns when the worker crashes there.
	Call(ctx context.Context, op string, args json.RawMessage, run func() (json.RawMessage, error)) error
	// Event is one of the service's events.
	Event(e reference.Event)
}

// IntentError is the error a service replied to an intent with.
type IntentError struct {
	Op, Code, Message string
	Definite          bool
}

func (e *IntentError) Error() string {
	s := fmt.Sprintf("service %s: %s: %s", e.Op, e.Code, e.Message)
	if !e.Definite {
		s += " (outcome unknown)"
	}
	return s
}

// OutcomeUnknown reports whether the intent may have taken effect.
func (e *IntentError) OutcomeUnknown() bool { return !e.Definite }

// Request sends one intent and serves its callbacks with h until the
// reply, which it decodes into out.
func (s *Service) Request(ctx context.Context, op string, args any, h Handler, out any) error {
	return s.request(ctx, op, args, h, out, s.opts.timeout())
}

// Call implements storeproc.Caller: a read request of the store
// protocol's read side (section 11), answered without callbacks.
func (s *Service) Call(ctx context.Context, op string, args json.RawMessage) (json.RawMessage, error) {
	var res json.RawMessage
	err := s.request(ctx, op, args, nil, &res, s.opts.timeout())
	if ie, ok := err.(*IntentError); ok {
		return nil, storeproc.WireError{Code: ie.Code, Definite: ie.Definite, Message: ie.Message}.Err(op)
	}
	return res, err
}

func (s *Service) request(ctx context.Context, op string, args any, h Handler, out any, wait time.Duration) error {
	if s.broken {
		return fmt.Errorf("service %q: %s on a process that was killed", s.opts.Command, op)
	}
	id := s.nextID
	s.nextID++
	raw, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("service %s: encoding the arguments: %w", op, err)
	}
	c := &conv{s: s, ctx: ctx, id: id, op: op, req: storeproc.DescribeRequest(id, op, raw), h: h, wait: wait}
	line, _ := json.Marshal(map[string]any{"id": id, "op": op, "args": json.RawMessage(raw)})
	if err := s.p.Send(json.RawMessage(line)); err != nil {
		return c.fail("writing the request to the service's stdin failed: "+err.Error(), "")
	}
	res, err := c.run()
	if err != nil || out == nil {
		return err
	}
	if err := storeproc.DecodeResult(res, out); err != nil {
		return c.fail("the result does not fit "+op+": "+err.Error(), string(res))
	}
	return nil
}

// conv is one request in progress.
type conv struct {
	s     *Service
	ctx   context.Context
	id    int64
	op    string
	req   string
	h     Handler
	wait  time.Duration
	step  int
	stash *message
	line  []byte // the line of the message last read, for errors
	// inStep is the window whose step is running ("" outside one), and
	// stepEnded says that its step's write was answered (StepEnds).
	inStep    string
	stepEnded bool
}

// run serves the request until its reply.
func (c *conv) run() (json.RawMessage, error) {
	for {
		m, kind, err := c.next()
		if err != nil {
			return nil, err
		}
		switch kind {
		case "ok":
			return m.OK, nil
		case "error":
			return nil, &IntentError{Op: c.op, Code: m.Error.Code, Definite: m.Error.Definite, Message: m.Error.Message}
		}
		if err := c.serve(m, kind); err != nil {
			return nil, err
		}
	}
}

// next returns the next message (a stashed one first), checked against
// the request: its id, its one part, a callback's step.
func (c *conv) next() (*message, string, error) {
	if m := c.stash; m != nil {
		c.stash = nil
		k, _ := m.kind()
		return m, k, nil
	}
	line, timedOut, ended, err := c.s.p.Next(c.ctx, c.wait)
	switch {
	case err != nil:
		c.s.Kill()
		return nil, "", &IntentError{Op: c.op, Code: "unavailable", Message: "cancelled while waiting for the service: " + err.Error()}
	case timedOut && c.op == "hello":
		c.s.Kill()
		return nil, "", c.s.newViolation(c.ctx, &storeproc.ProtocolError{Request: c.req, NoStart: true, Got: "nothing",
			Problem: fmt.Sprintf("no reply to hello within %s: the service did not start in time (--service-timeout)", c.wait)})
	case timedOut:
		return nil, "", c.fail(fmt.Sprintf("no message within %s", c.wait), "nothing")
	case ended != nil:
		return nil, "", c.fail("the service process ended while the request waited for its reply: "+ended.Error(), "")
	}
	c.line = line
	var m message
	if err := json.Unmarshal(line, &m); err != nil {
		if t := bytes.TrimLeft(line, " \t"); len(t) == 0 || t[0] != '{' {
			return nil, "", c.fail("a line on stdout that is not a JSON object ("+err.Error()+"); logs belong on stderr", string(line))
		}
		return nil, "", c.fail("a message of the wrong shape: "+err.Error(), string(line))
	}
	kind, step := m.kind()
	switch {
	case kind == "":
		return nil, "", c.fail("a message must have an id and exactly one of ok, error, event, at, model, now, sleep, store, call, done", string(line))
	case *m.ID != c.id:
		return nil, "", c.fail(fmt.Sprintf("a message for request %d, which is not the request in progress (%d)", *m.ID, c.id), string(line))
	case kind == "error" && m.Error.Code == "":
		return nil, "", c.fail("an error needs a code", string(line))
	case kind == "ok" && (len(m.OK) == 0 || m.OK[0] != '{'):
		return nil, "", c.fail("ok must hold a JSON object", string(line))
	}
	if kind != "ok" && kind != "error" && kind != "event" {
		if c.h == nil {
			return nil, "", c.fail("a "+kind+" callback in a read request (section 11: reads are answered without callbacks)", string(line))
		}
		c.step++
		if step != c.step {
			return nil, "", c.fail(fmt.Sprintf("%s step %d, want %d (steps count the callbacks of a request from 1)", kind, step, c.step), string(line))
		}
	}
	return &m, kind, nil
}

// serve answers one callback or takes one event.
func (c *conv) serve(m *message, kind string) error {
	d := c.s.decl
	switch kind {
	case "event":
		if !d.Has(ReportEvents) || c.h == nil {
			return c.fail(`an event from a service that did not declare reports: ["events"]`, string(c.line))
		}
		c.h.Event(*m.Event)
		return nil
	case "at":
		return c.window(m.At.Point)
	case "model":
		ex, err := c.h.Model(c.ctx, m.Model.ModelRequest)
		if err != nil {
			return c.answer(map[string]any{"error": storeproc.WireErrorOf(err)})
		}
		return c.answer(map[string]any{"extraction": WireExtraction(ex)})
	case "now":
		return c.answer(map[string]any{"now": c.h.Now()})
	case "sleep":
		return c.answer(map[string]any{"now": c.h.Sleep(c.ctx, m.Sleep.Millis)})
	case "store":
		store := storeproc.StoreOfOp(m.Store.Op)
		if store == "" || !d.HarnessStore(store) {
			return c.fail(fmt.Sprintf("a store callback for %q, which is no operation of a store the service declared in harnessStores %v", m.Store.Op, d.HarnessStores), string(c.line))
		}
		res, err := c.h.Store(c.ctx, m.Store.Op, m.Store.Args)
		c.endsStep(m.Store.Op)
		if err != nil {
			return c.answer(map[string]any{"error": storeproc.WireErrorOf(err)})
		}
		return c.answer(map[string]any{"ok": res})
	case "call":
		return c.call(m.Call)
	case "done":
		return c.fail("a done without its call", string(c.line))
	}
	return c.fail("unknown message "+kind, string(c.line))
}

// window answers a crash window the service declared under whatever fault
// the worker armed there, in the worker's runtime: the step that follows
// it runs until the service's next window or its reply, and every
// callback it makes meanwhile is part of it (a fenced step's store calls
// stay quiet, an unknown-outcome fault kills the service after it).
func (c *conv) window(point string) error {
	if !slices.Contains(c.s.decl.Windows, point) {
		return c.fail(fmt.Sprintf("crash window %q, which the service did not declare in hello (windows %v)", point, c.s.decl.Windows), string(c.line))
	}
	step := c.step
	rt := faults.RuntimeFrom(c.ctx)
	if rt == nil {
		return c.answerStep(step, map[string]any{"action": "continue"})
	}
	if rt.OnReach != nil && faults.IsStorePoint(faults.Point(point)) {
		rt.OnReach(faults.Reach{Point: faults.Point(point), Method: "service " + c.op})
	}
	var stepErr error
	err := rt.At(c.ctx, faults.Point(point), func() error {
		if stepErr = c.answerStep(step, map[string]any{"action": "continue"}); stepErr != nil {
			return stepErr
		}
		c.inStep, c.stepEnded = point, false
		stepErr = c.untilWindowOrReply()
		c.inStep = ""
		return stepErr
	})
	if stepErr != nil {
		return stepErr
	}
	if err == nil {
		return nil
	}
	// The fault failed the step: the service goes on as its code does on
	// such an error.
	return c.answerStep(step, map[string]any{"action": "fail", "retryable": reference.IsRetryable(err)})
}

// untilWindowOrReply serves the step of a window until the answer to its
// write (StepEnds), or the service's reply, which it leaves for run. A
// window declared before that write lies inside the step, as a
// reference window inside another's (a re-plan's prepare inside its
// conflict handling): it is answered there, and its write ends both.
func (c *conv) untilWindowOrReply() error {
	for {
		m, kind, err := c.next()
		if err != nil {
			return err
		}
		switch kind {
		case "ok", "error":
			c.stash = m // run takes it
			return nil
		case "at":
			outer := c.inStep
			if err := c.window(m.At.Point); err != nil {
				return err
			}
			c.inStep = outer
		default:
			if err := c.serve(m, kind); err != nil {
				return err
			}
		}
		if c.stepEnded {
			return nil
		}
	}
}

// endsStep notes that a store call of op was answered within a window's
// step, which ends there if op is the step's write.
func (c *conv) endsStep(op string) {
	if c.inStep != "" && StepEnds(c.inStep, op) {
		c.stepEnded = true
	}
}

// StepEnds says whether a store call of op, made in the step that follows
// window, is that step's write, with whose answer the step ends
// (docs/service-protocol.md, section 5): a write of the operations,
// states, registry, graph, checkpoints or plans; a lock provider's call
// only for leaseAcquire (elsewhere it is the fence check before a write).
func StepEnds(window, op string) bool {
	if window == string(faults.LeaseAcquire) {
		return op == "locks.tryAcquire"
	}
	switch op {
	case "ops.create", "ops.cas", "ops.claim", "ops.releaseClaim", "states.cas", "states.remove", "states.recordVersion",
		"registry.saveAll", "graph.apply", "checkpoints.put", "plans.save":
		return true
	}
	return false
}

// call answers a call to one of the service's own stores: the handler
// runs it through the harness's store gate and its eyes; run lets the
// service make it and waits for its done.
func (c *conv) call(cb *storeCallback) error {
	d := c.s.decl
	store := storeproc.StoreOfOp(cb.Op)
	switch {
	case !d.Has(ReportCalls):
		return c.fail(`a call from a service that did not declare reports: ["calls"]`, string(c.line))
	case store == "" || d.HarnessStore(store):
		return c.fail(fmt.Sprintf("a call of %q, which is no operation of one of the service's own stores (harnessStores %v)", cb.Op, d.HarnessStores), string(c.line))
	}
	step := c.step
	ran, doneStep := false, 0
	var fatal error
	run := func() (json.RawMessage, error) {
		ran = true
		if fatal = c.answerStep(step, map[string]any{"action": "continue"}); fatal != nil {
			return nil, fatal
		}
		for {
			m, kind, err := c.next()
			if err != nil {
				fatal = err
				return nil, err
			}
			switch kind {
			case "event":
				if fatal = c.serve(m, kind); fatal != nil {
					return nil, fatal
				}
				continue
			case "done":
			default:
				fatal = c.fail("between a call and its done only events may come, not "+kind, string(c.line))
				return nil, fatal
			}
			if m.Done.Op != cb.Op {
				fatal = c.fail(fmt.Sprintf("the done of %s reports %q", cb.Op, m.Done.Op), string(c.line))
				return nil, fatal
			}
			doneStep = c.step
			if m.Done.Error != nil {
				return nil, m.Done.Error.Err(cb.Op)
			}
			if len(m.Done.OK) == 0 || m.Done.OK[0] != '{' {
				fatal = c.fail("a done needs ok (a JSON object) or error", string(c.line))
				return nil, fatal
			}
			return m.Done.OK, nil
		}
	}
	err := c.h.Call(c.ctx, cb.Op, cb.Args, run)
	var bad *BadCall
	switch {
	case fatal != nil:
		return fatal
	case errors.As(err, &bad):
		return c.fail(bad.Error(), string(c.line))
	case !ran:
		return c.answerStep(step, map[string]any{"action": "fail", "retryable": reference.IsRetryable(err)})
	}
	c.endsStep(cb.Op)
	return c.answerStep(doneStep, map[string]any{"action": "continue"})
}

// answer answers the callback last read.
func (c *conv) answer(body map[string]any) error { return c.answerStep(c.step, body) }

func (c *conv) answerStep(step int, body map[string]any) error {
	body["id"], body["step"] = c.id, step
	if err := c.s.p.Send(body); err != nil {
		return c.fail("writing an answer to the service's stdin failed: "+err.Error(), "")
	}
	return nil
}

// fail kills the process and reports a violation of the protocol.
func (c *conv) fail(problem, got string) error {
	c.s.Kill()
	return c.s.newViolation(c.ctx, &storeproc.ProtocolError{Request: c.req, Problem: problem, Got: got})
}

func (s *Service) violation(ctx context.Context, req, problem, got string) error {
	s.Kill()
	return s.newViolation(ctx, &storeproc.ProtocolError{Request: req, Problem: problem, Got: got})
}

func (s *Service) newViolation(ctx context.Context, e *storeproc.ProtocolError) error {
	if len(e.Got) > 500 {
		e.Got = e.Got[:500] + "..."
	}
	e.Command, e.Process = s.opts.Command, "service"
	if s.p != nil {
		select {
		case <-s.p.Exited():
		case <-time.After(50 * time.Millisecond):
		}
		e.Stderr, e.Log = s.p.Stderr(), s.p.LogPath()
	}
	if s.opts.OnProtocolError != nil {
		s.opts.OnProtocolError(ctx, e)
	}
	return e
}

// IsViolation reports whether err is a violation of the protocol by the
// service (the run is undecided), not an answer.
func IsViolation(err error) bool {
	var pe *storeproc.ProtocolError
	return errors.As(err, &pe)
}

func describe(id int64, op string, args any) string {
	b, _ := json.Marshal(args)
	return storeproc.DescribeRequest(id, op, b)
}

// BadCall is a Handler.Call error that says the call could not even be
// decoded: a violation of the protocol, not a fault to answer with fail.
type BadCall struct{ Err error }

func (e *BadCall) Error() string { return "a call the harness cannot decode: " + e.Err.Error() }
func (e *BadCall) Unwrap() error { return e.Err }
