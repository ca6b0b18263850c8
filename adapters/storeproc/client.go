package storeproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/strictjson"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/reference/plansave"
)

// Client is a pool of store processes on one data directory.
type Client struct {
	opts   Options
	name   string
	stores []string
	pool   chan *proc

	mu     sync.Mutex
	closed bool
}

// Start starts opts.Procs store processes and greets each (hello). A
// process that exits, answers wrongly or not at all is an error naming the
// command and its stderr.
func Start(ctx context.Context, opts Options) (*Client, error) {
	if opts.Procs <= 0 {
		opts.Procs = 1
	}
	if strings.TrimSpace(opts.Dir) == "" {
		return nil, fmt.Errorf("%w: store data directory is blank", reference.ErrInvalidArgument)
	}
	if opts.LogDir != "" && within(opts.LogDir, opts.Dir) {
		return nil, fmt.Errorf("%w: store log directory %s is inside the store's data directory %s: the data directory holds the store's own files only", reference.ErrInvalidArgument, opts.LogDir, opts.Dir)
	}
	c := &Client{opts: opts, pool: make(chan *proc, opts.Procs)}
	for range opts.Procs {
		p, err := c.spawn(ctx)
		if err != nil {
			for range len(c.pool) {
				(<-c.pool).stop()
			}
			return nil, err
		}
		c.pool <- p
	}
	return c, nil
}

// within reports whether path is dir or lies under it.
func within(path, dir string) bool {
	p, err1 := filepath.Abs(path)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(d, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// Name is the store's name from its hello reply.
func (c *Client) Name() string { return c.name }

// Declared lists the interfaces the store declared in hello.
func (c *Client) Declared() []string { return slices.Clone(c.stores) }

// Has reports whether the store declared interface s.
func (c *Client) Has(s string) bool { return slices.Contains(c.stores, s) }

// Close stops every store process (stdin closed, 5 s to exit, then
// SIGKILL).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.drain()
	return nil
}

// drain takes every slot of the pool (waiting up to the call timeout for
// those serving a call), stops their processes and leaves empty slots, so
// a call after Close fails at once.
func (c *Client) drain() {
	deadline := time.After(c.opts.timeout() + 5*time.Second)
	taken := 0
	for ; taken < c.opts.Procs; taken++ {
		select {
		case p := <-c.pool:
			if p != nil {
				c.release(p)
			}
		case <-deadline:
			return
		}
	}
	for range taken {
		c.pool <- nil
	}
}

// spawn returns a greeted process: an idle one of the pool, or one
// started now and greeted (hello).
func (c *Client) spawn(ctx context.Context) (*proc, error) {
	if c.opts.Pool != nil {
		if p := c.reuse(ctx); p != nil {
			return p, nil
		}
	}
	t0 := time.Now()
	if c.opts.Spare && makeDirs(&c.opts) == nil {
		// The directories first, as for a process started here: the
		// case's hello opens its data there.
		if p := c.adopt(spareAddr(os.Getppid())); p != nil {
			res, err := c.hello(quiet(ctx), p)
			if err == nil && c.check(p, res) == "" {
				if c.opts.OnStart != nil {
					c.opts.OnStart(time.Since(t0))
				}
				return p, nil
			}
			// A spare that no longer answers as it should: a fresh
			// process's hello judges the store.
			p.kill()
		}
	}
	p, err := start(&c.opts)
	if err != nil {
		return nil, c.protocolErr(ctx, nil, "start", "the store process could not be started: "+err.Error(), "")
	}
	res, err := c.hello(ctx, p)
	if err != nil {
		p.kill()
		return nil, err
	}
	if problem := c.check(p, res); problem != "" {
		p.kill()
		return nil, c.protocolErr(ctx, p, describe(0, "hello", c.helloArgs()), problem, "")
	}
	if c.opts.OnStart != nil {
		c.opts.OnStart(time.Since(t0))
	}
	return p, nil
}

// helloReply is the result of hello.
type helloReply struct {
	Protocol string   `json:"protocol"`
	Name     string   `json:"name"`
	Stores   []string `json:"stores"`
	// Reopen: the process may be pooled (section 3, Pool).
	Reopen bool `json:"reopen"`
}

func (c *Client) helloArgs() map[string]string {
	return map[string]string{"protocol": Protocol, "dir": c.opts.Dir, "namespace": c.opts.Namespace, "mutant": c.opts.Mutant}
}

// hello runs the handshake on p.
func (c *Client) hello(ctx context.Context, p *proc) (helloReply, error) {
	var res helloReply
	err := c.roundTrip(ctx, p, "hello", c.helloArgs(), &res, c.opts.helloTimeout())
	return res, err
}

// check judges a hello reply ("" when it is fine) and keeps what the
// first process declared.
func (c *Client) check(p *proc, res helloReply) string {
	if res.Protocol != Protocol {
		return fmt.Sprintf("the hello reply speaks protocol %q, crashmatrix speaks %q", res.Protocol, Protocol)
	}
	if strings.TrimSpace(res.Name) == "" {
		return "the hello reply has no name"
	}
	for _, s := range res.Stores {
		if !slices.Contains(knownStores, s) {
			return fmt.Sprintf("the hello reply declares store %q (known: %s)", s, strings.Join(knownStores, ", "))
		}
	}
	for _, s := range c.opts.Require {
		if !slices.Contains(res.Stores, s) {
			return fmt.Sprintf("the store does not declare %q, which this run needs (it declares %v)", s, res.Stores)
		}
	}
	if c.name == "" {
		c.name, c.stores = res.Name, res.Stores
	} else if !slices.Equal(c.stores, res.Stores) {
		return fmt.Sprintf("this process declares %v, the first declared %v", res.Stores, c.stores)
	}
	p.reopen = res.Reopen
	return ""
}

// describe renders a request for errors, its arguments cut short.
func describe(id int64, op string, args any) string {
	b, _ := json.Marshal(args)
	return describeRaw(id, op, b)
}

// DescribeRequest renders a request for errors ("ops.get #7 {...}"), its
// encoded arguments cut short: the service protocol's errors name theirs
// the same way.
func DescribeRequest(id int64, op string, args []byte) string { return describeRaw(id, op, args) }

// describeRaw is describe on arguments already encoded.
func describeRaw(id int64, op string, args []byte) string {
	if len(args) > 300 {
		return op + " #" + strconv.FormatInt(id, 10) + " " + string(args[:300]) + "..."
	}
	return op + " #" + strconv.FormatInt(id, 10) + " " + string(args)
}

// requestLine is the request {"id":id,"op":op,"args":args} as one line,
// op written as encoding/json writes a string (strictjson.AppendString).
func requestLine(id int64, op string, args []byte) []byte {
	b := make([]byte, 0, len(args)+len(op)+42)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"op":`...)
	b = strictjson.AppendString(b, op)
	b = append(b, `,"args":`...)
	b = append(b, args...)
	return append(b, "}\n"...)
}

// answerLine is the answer {"id":id,"step":step,"action":action} to a
// crash window as one line (action one of continue, fail, die: nothing to
// escape).
func answerLine(id int64, step int, action string) []byte {
	b := make([]byte, 0, 64)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, int64(step), 10)
	b = append(b, `,"action":"`...)
	b = append(b, action...)
	return append(b, "\"}\n"...)
}

func (c *Client) protocolErr(ctx context.Context, p *proc, req, problem, got string) *ProtocolError {
	return c.newProtocolErr(ctx, p, &ProtocolError{Request: req, Problem: problem, Got: got})
}

// newProtocolErr completes e (the command, what came back cut short, the
// process's stderr) and tells OnProtocolError.
func (c *Client) newProtocolErr(ctx context.Context, p *proc, e *ProtocolError) *ProtocolError {
	if len(e.Got) > 500 {
		e.Got = e.Got[:500] + "..."
	}
	e.Command = c.opts.Command
	if p != nil {
		// Give the process a moment to finish writing what it says on
		// stderr about its own failure.
		select {
		case <-p.exited:
		case <-time.After(50 * time.Millisecond):
		}
		e.Stderr, e.Log = p.stderr.String(), p.logPath
	}
	if c.opts.OnProtocolError != nil && ctx.Value(quietKey{}) == nil {
		c.opts.OnProtocolError(ctx, e)
	}
	return e
}

// call sends op with args on a free process and decodes the result into
// out (required lists the result fields that must be present).
func (c *Client) call(ctx context.Context, op string, args, out any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var p *proc
	select {
	case p = <-c.pool:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() {
		if p != nil && p.broken {
			go p.stop()
			p = nil
		}
		c.pool <- p
	}()
	if p == nil || p.broken {
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return fmt.Errorf("store %s: %s after Close", c.name, op)
		}
		np, err := c.spawn(ctx)
		if err != nil {
			p = nil
			return err
		}
		p = np
	}
	return c.roundTrip(ctx, p, op, args, out, c.opts.timeout())
}

// roundTrip runs one request on p: it sends it, answers the store's crash
// windows (at) and returns its result or error.
func (c *Client) roundTrip(ctx context.Context, p *proc, op string, args, out any, wait time.Duration) error {
	id := p.nextID
	p.nextID++
	// The arguments are encoded once: for the request line and, should
	// the call go wrong, for the error that names it.
	raw, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("store %s: encoding the arguments of %s: %w", c.opts.Command, op, err)
	}
	// The request as errors name it, rendered only for one.
	req := func() string { return describeRaw(id, op, raw) }
	fail := func(problem, got string) error {
		p.kill()
		return c.protocolErr(ctx, p, req(), problem, got)
	}
	if err := p.sendLine(requestLine(id, op, raw)); err != nil {
		return fail("writing the request to the store's stdin failed: "+err.Error(), "")
	}
	step := 0
	var stashed *event
	for {
		var ev event
		if stashed != nil {
			ev, stashed = *stashed, nil
		} else {
			var timedOut bool
			var err error
			ev, timedOut, err = p.next(ctx, wait)
			if err != nil {
				// Cancelled: the store may be anywhere in the request.
				p.kill()
				return &Error{Op: op, ID: id, Code: "unavailable", Definite: false, Message: "cancelled while waiting for the reply: " + err.Error(), cause: err}
			}
			if timedOut {
				if op == "hello" {
					p.kill()
					return c.newProtocolErr(ctx, p, &ProtocolError{Request: req(), NoStart: true, Got: "nothing",
						Problem: fmt.Sprintf("no reply to hello within %s: the store did not start in time (the start timeout, Options.HelloTimeout: crashmatrix --store-timeout)", wait)})
				}
				return fail(fmt.Sprintf("no reply within %s", wait), "nothing")
			}
		}
		if ev.end != nil {
			return fail("the store process ended while the request waited for its reply: "+ev.end.Error(), "")
		}
		m, problem := parseMessage(ev.line)
		if problem != "" {
			return fail(problem, string(ev.line))
		}
		if *m.ID != id {
			return fail(checkOK(m, ev.line, fmt.Sprintf("a message for request %d, which is not the request in progress (%d)", *m.ID, id)), string(ev.line))
		}
		if m.At != nil {
			step++
			if m.At.Step != step {
				return fail(fmt.Sprintf("crash window step %d, want %d (steps count the at messages of a request from 1)", m.At.Step, step), string(ev.line))
			}
			if err := faults.ValidateStorePoint(faults.Point(m.At.Point)); err != nil {
				return fail("bad crash window name: "+err.Error(), string(ev.line))
			}
			next, err := c.window(ctx, p, op, id, *m.At, wait, req())
			if err != nil {
				return err
			}
			stashed = next
			continue
		}
		if m.Error != nil {
			return m.Error.toError(op, id)
		}
		if out != nil {
			if err := decodeResult(m.OK, out); err != nil {
				return fail(checkOK(m, ev.line, "the result does not fit "+op+": "+err.Error()), string(ev.line))
			}
		} else if m.okUnchecked && !json.Valid(m.OK) {
			return fail(checkOK(m, ev.line, "ok must hold a JSON object"), string(ev.line))
		}
		return nil
	}
}

// parseMessage reads one line as a message: the common replies through
// readEnvelope, with their ok part not yet checked (message.okUnchecked:
// the caller that decodes it, or checkOK, judges it), anything else
// through parseMessageFull.
func parseMessage(line []byte) (message, string) {
	if id, part, raw, ok := readEnvelope(line); ok {
		switch part {
		case "ok":
			return message{ID: &id, OK: raw, okUnchecked: true}, ""
		case "at":
			var at atMsg
			if json.Unmarshal(raw, &at) == nil && at.Point != "" {
				return message{ID: &id, At: &at}, ""
			}
		}
	}
	return parseMessageFull(line)
}

// readEnvelope reads the two shapes nearly every reply has,
// {"id":N,"ok":{...}} and {"id":N,"at":{...}} (in either order, with any
// white space), without decoding the line: it returns the id, which of
// ok and at the line holds, and that part's raw object, whose own syntax
// it does not judge (skipValue). Anything else gives false: a key with an
// escape, another or a repeated key, an id that is not a plain integer,
// a part that is not an object.
func readEnvelope(line []byte) (id int64, part string, raw []byte, ok bool) {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return 0, "", nil, false
	}
	i++
	seenID := false
	for {
		i = skipSpace(line, i)
		if i >= len(line) || line[i] != '"' {
			return 0, "", nil, false
		}
		end := i + 1
		for end < len(line) && line[end] != '"' && line[end] != '\\' {
			end++
		}
		if end >= len(line) || line[end] != '"' {
			return 0, "", nil, false
		}
		key := string(line[i+1 : end])
		i = skipSpace(line, end+1)
		if i >= len(line) || line[i] != ':' {
			return 0, "", nil, false
		}
		i = skipSpace(line, i+1)
		switch {
		case key == "id" && !seenID:
			j := i
			if j < len(line) && line[j] == '-' {
				j++
			}
			digits := j
			for j < len(line) && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			// JSON's integers: no leading zero, nothing of a fraction or
			// an exponent (parseMessageFull says what is wrong with those).
			if j == digits || line[digits] == '0' && j-digits > 1 {
				return 0, "", nil, false
			}
			n, err := strconv.ParseInt(string(line[i:j]), 10, 64)
			if err != nil {
				return 0, "", nil, false
			}
			id, seenID, i = n, true, j
		case (key == "ok" || key == "at") && part == "":
			if i >= len(line) || line[i] != '{' {
				return 0, "", nil, false
			}
			j := skipValue(line, i)
			if j < 0 {
				return 0, "", nil, false
			}
			part, raw, i = key, line[i:j], j
		default:
			return 0, "", nil, false
		}
		i = skipSpace(line, i)
		if i < len(line) && line[i] == ',' {
			i++
			continue
		}
		if i < len(line) && line[i] == '}' && seenID && part != "" && skipSpace(line, i+1) == len(line) {
			return id, part, raw, true
		}
		return 0, "", nil, false
	}
}

// checkOK is the problem with a message whose ok part parseMessage did
// not check, read from line, given the problem found so far (its ok part
// does not decode, its id is not the request's): what parseMessageFull
// says of a line that is not JSON, problem otherwise.
func checkOK(m message, line []byte, problem string) string {
	if m.okUnchecked && !json.Valid(line) {
		if _, p := parseMessageFull(line); p != "" {
			return p
		}
	}
	return problem
}

// parseMessageFull checks one line against the message shapes of section 2,
// decoding it once: ok, error and at stay raw until one is known to be
// the message's only part.
func parseMessageFull(line []byte) (message, string) {
	var m message
	var w struct {
		ID    *int64          `json:"id"`
		OK    json.RawMessage `json:"ok"`
		Error json.RawMessage `json:"error"`
		At    json.RawMessage `json:"at"`
	}
	if err := json.Unmarshal(line, &w); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || bytes.TrimLeft(line, " \t")[0] != '{' {
			return m, "a line on stdout that is not a JSON object (" + err.Error() + "); logs belong on stderr"
		}
		return m, "a message of the wrong shape: " + err.Error()
	}
	m.ID, m.OK = w.ID, w.OK
	if w.Error != nil && !isNull(w.Error) {
		if err := json.Unmarshal(w.Error, &m.Error); err != nil {
			return m, "a message of the wrong shape: " + err.Error()
		}
	}
	if w.At != nil && !isNull(w.At) {
		if err := json.Unmarshal(w.At, &m.At); err != nil {
			return m, "a message of the wrong shape: " + err.Error()
		}
	}
	if m.ID == nil {
		return m, "a message without an id"
	}
	n := 0
	for _, part := range []json.RawMessage{w.OK, w.Error, w.At} {
		if part != nil {
			n++
		}
	}
	if n != 1 {
		return m, "a message must have exactly one of ok, error, at"
	}
	if w.OK != nil && (len(m.OK) == 0 || m.OK[0] != '{') {
		return m, "ok must hold a JSON object"
	}
	if m.Error != nil && (m.Error.Code == "" || m.Error.Definite == nil) {
		return m, "an error needs a code and definite (true or false)"
	}
	if w.Error != nil && m.Error == nil {
		return m, "error must hold an object"
	}
	if w.At != nil && (m.At == nil || m.At.Point == "") {
		return m, "at must hold {point, step}"
	}
	return m, ""
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// decodeResult decodes a result, checking the fields marked required.
func decodeResult(raw json.RawMessage, out any) error {
	if r, ok := out.(interface{ required() []string }); ok {
		missing, read := missingKey(raw, r.required())
		if !read {
			// Not an object topKeys reads (escaped keys, bad syntax):
			// decoded in full, which says what is wrong with it.
			var fields map[string]json.RawMessage
			if err := json.Unmarshal(raw, &fields); err != nil {
				return err
			}
			missing = ""
			for _, f := range r.required() {
				if _, ok := fields[f]; !ok {
					missing = f
					break
				}
			}
		}
		if missing != "" {
			return fmt.Errorf("field %q is missing", missing)
		}
	}
	return jsonTypeErr(json.Unmarshal(raw, out))
}

// missingKey returns the first of keys that is not a key of the JSON
// object raw ("" when it has them all), reading only the object's top
// level, without decoding it: the result is decoded once, into its type.
// read is false when raw is not an object it reads (a key with an escape,
// or not an object at all): the caller decodes it to know.
func missingKey(raw []byte, keys []string) (missing string, read bool) {
	if len(keys) > 64 {
		return "", false
	}
	var found uint64
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return "", false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		i++
	} else {
		for {
			if i >= len(raw) || raw[i] != '"' {
				return "", false
			}
			end := i + 1
			for end < len(raw) && raw[end] != '"' && raw[end] != '\\' {
				end++
			}
			if end >= len(raw) || raw[end] != '"' {
				return "", false
			}
			key := raw[i+1 : end]
			for k, want := range keys {
				if string(key) == want {
					found |= 1 << k
				}
			}
			i = skipSpace(raw, end+1)
			if i >= len(raw) || raw[i] != ':' {
				return "", false
			}
			if i = skipValue(raw, skipSpace(raw, i+1)); i < 0 {
				return "", false
			}
			i = skipSpace(raw, i)
			if i < len(raw) && raw[i] == ',' {
				i = skipSpace(raw, i+1)
				continue
			}
			if i < len(raw) && raw[i] == '}' {
				i++
				break
			}
			return "", false
		}
	}
	if skipSpace(raw, i) != len(raw) {
		return "", false
	}
	for k, want := range keys {
		if found&(1<<k) == 0 {
			return want, true
		}
	}
	return "", true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value at b[i:] (-1 when
// it ends early). Only the nesting and the strings are followed: the
// value's own syntax is the decoder's to judge.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return -1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		i++
		if depth == 0 && (b[i-1] == '"' || b[i-1] == '}' || b[i-1] == ']') {
			return i
		}
	}
	if depth == 0 {
		return i
	}
	return -1
}

// jsonTypeErr says a result field of the wrong JSON type in the
// protocol's words ("result field created: want a JSON boolean, got a
// string") rather than Go's ("cannot unmarshal string into Go struct
// field .created of type bool").
func jsonTypeErr(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	want := "value of another type"
	switch te.Type.Kind() {
	case reflect.Bool:
		want = "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "integer"
	case reflect.Float32, reflect.Float64:
		want = "number"
	case reflect.String:
		want = "string"
	case reflect.Slice, reflect.Array:
		want = "array"
	case reflect.Struct, reflect.Map:
		want = "object"
	}
	got := te.Value
	if got == "bool" {
		got = "boolean"
	}
	field := strings.TrimPrefix(te.Field, ".")
	if field == "" {
		return fmt.Errorf("result: want a JSON %s, got a JSON %s", want, got)
	}
	return fmt.Errorf("result field %s: want a JSON %s, got a JSON %s", field, want, got)
}

// window answers a crash window the store declared, under whatever fault
// the worker armed there: the point is reached in the worker's runtime as
// if a Go store had called faults.At. It returns the next message of the
// request when the step was let run (continue), or the request's outcome.
func (c *Client) window(ctx context.Context, p *proc, op string, id int64, at atMsg, wait time.Duration, req string) (*event, error) {
	answer := func(action string) error {
		if err := p.sendLine(answerLine(id, at.Step, action)); err != nil {
			p.kill()
			return c.protocolErr(ctx, p, req, "writing the answer to crash window "+at.Point+" failed: "+err.Error(), "")
		}
		return nil
	}
	rt := faults.RuntimeFrom(ctx)
	if rt == nil {
		return nil, answer("continue")
	}
	if rt.OnReach != nil {
		rt.OnReach(faults.Reach{Point: faults.Point(at.Point), Method: "store-cmd " + op})
	}
	var next *event
	var stepErr error
	sub := &faults.Runtime{Injector: rt.Injector, OnHit: rt.OnHit, Sleep: rt.Sleep, Server: rt.Server}
	if rt.Crash != nil {
		sub.Crash = func(h faults.Hit) {
			// The service's process dies here, and its store client with
			// it: nothing after this point runs.
			_ = p.sendLine(answerLine(id, at.Step, "die"))
			p.kill()
			rt.Crash(h)
		}
	}
	err := sub.At(ctx, faults.Point(at.Point), func() error {
		if stepErr = answer("continue"); stepErr != nil {
			return stepErr
		}
		// The step runs until the store's next message (its next window
		// or the reply): an unknown-outcome fault kills the process there.
		ev, timedOut, err := p.next(ctx, wait)
		switch {
		case err != nil:
			p.kill()
			stepErr = &Error{Op: op, ID: id, Code: "unavailable", Definite: false, Message: "cancelled while waiting for the reply: " + err.Error(), cause: err}
		case timedOut:
			p.kill()
			stepErr = c.protocolErr(ctx, p, req, fmt.Sprintf("no message within %s after crash window %s", wait, at.Point), "nothing")
		default:
			next = &ev
		}
		return stepErr
	})
	if stepErr != nil {
		return nil, stepErr
	}
	if err == nil {
		return next, nil
	}
	// The fault failed the step: the store is told so and must roll back
	// and reply with an error.
	if aerr := answer("fail"); aerr != nil {
		return nil, aerr
	}
	ev, timedOut, rerr := p.next(ctx, wait)
	switch {
	case rerr != nil:
		p.kill()
		return nil, errors.Join(err, rerr)
	case timedOut:
		p.kill()
		return nil, c.protocolErr(ctx, p, req, fmt.Sprintf("no reply within %s after the answer fail at %s", wait, at.Point), "nothing")
	case ev.end != nil:
		p.kill()
		return nil, c.protocolErr(ctx, p, req, "the store process ended after the answer fail: "+ev.end.Error(), "")
	}
	m, problem := parseMessageFull(ev.line)
	if problem == "" && (*m.ID != id || m.Error == nil) {
		problem = "after the answer fail at " + at.Point + " the store must reply to this request with an error (code injected)"
	}
	if problem != "" {
		p.kill()
		return nil, c.protocolErr(ctx, p, req, problem, string(ev.line))
	}
	return nil, err
}

// Error is an error a store process replied with.
type Error struct {
	Op       string
	ID       int64
	Code     string
	Definite bool
	Message  string
	cause    error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("store %s #%d: %s: %s", e.Op, e.ID, e.Code, e.Message)
	if !e.Definite {
		s += " (outcome unknown)"
	}
	return s
}

// OutcomeUnknown reports whether the request may have taken effect
// (reference.IsOutcomeUnknown).
func (e *Error) OutcomeUnknown() bool { return !e.Definite }

// Permanent reports whether a retry cannot help (reference.IsRetryable).
func (e *Error) Permanent() bool { return e.Code == "permanent" || e.Code == "unsupported" }

// Unwrap maps the code to the reference's error.
func (e *Error) Unwrap() error {
	if e.cause != nil {
		return e.cause
	}
	switch e.Code {
	case "not_found":
		return reference.ErrNotFound
	case "time_backwards":
		return reference.ErrTimeBackwards
	case "registry_conflict":
		return reference.ErrRegistryConflict
	case "missing_endpoint":
		return reference.ErrMissingEndpoint
	case "lease_lost":
		return reference.ErrLeaseLost
	case "plan_conflict":
		return plansave.ErrConflict
	case "invalid_argument":
		return reference.ErrInvalidArgument
	}
	return nil
}

func (w *wireError) toError(op string, id int64) error {
	return &Error{Op: op, ID: id, Code: w.Code, Definite: *w.Definite, Message: w.Message}
}
