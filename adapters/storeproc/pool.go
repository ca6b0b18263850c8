package storeproc

import (
	"context"
	"sync"
	"time"
)

// Pool keeps store processes between the clients of one process that only
// read or load a case's stores from outside its workers (the supervisor's
// snapshot after a case, an initial-state load before it), so that a store
// pays its start-up (a Python interpreter, a JVM) once per pool slot rather
// than once per case. Only a process whose store declared "reopen" in its
// hello reply is kept: when its client closes, it is sent close (the store
// lets go of everything it holds on the data directory) and waits idle; the
// next Start on the same command greets it again with the new case's hello,
// which it serves as a process started afresh would (section 3 of
// docs/store-protocol.md). A worker's store processes are never pooled:
// they die with their worker.
type Pool struct {
	mu   sync.Mutex
	idle []*proc
}

// NewPool returns an empty pool.
func NewPool() *Pool { return &Pool{} }

// take returns an idle process started by command in workDir, or nil.
func (pl *Pool) take(command, workDir string) *proc {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for i := len(pl.idle) - 1; i >= 0; i-- {
		p := pl.idle[i]
		if p.command == command && p.workDir == workDir {
			pl.idle = append(pl.idle[:i], pl.idle[i+1:]...)
			return p
		}
	}
	return nil
}

func (pl *Pool) put(p *proc) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.idle = append(pl.idle, p)
}

// Close stops the idle processes (stdin closed, 5 s to exit, then
// SIGKILL). The pool stays usable: a later client starts afresh.
func (pl *Pool) Close() error {
	pl.mu.Lock()
	idle := pl.idle
	pl.idle = nil
	pl.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range idle {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop() }()
	}
	wg.Wait()
	return nil
}

// Idle is how many processes wait in the pool.
func (pl *Pool) Idle() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return len(pl.idle)
}

// reuse greets an idle process of the pool with this client's hello; nil
// when there is none or it no longer answers as it should (it is then
// killed, and the caller starts a fresh one, whose hello judges the store).
func (c *Client) reuse(ctx context.Context) *proc {
	for {
		p := c.opts.Pool.take(c.opts.Command, c.opts.WorkDir)
		if p == nil {
			return nil
		}
		select {
		case <-p.exited:
			p.kill()
			continue
		default:
		}
		res, err := c.hello(quiet(ctx), p)
		if err != nil || !res.Reopen || c.check(p, res) != "" {
			p.kill()
			continue
		}
		return p
	}
}

// release returns p to the pool when its store declared reopen and it
// lets go of the data directory (close), or, a spare, to the supervisor
// that started it; otherwise it stops p.
func (c *Client) release(p *proc) {
	spare := p.spareOf != ""
	if (c.opts.Pool == nil && !spare) || !p.reopen || p.broken {
		p.stop()
		return
	}
	ctx, cancel := context.WithTimeout(quiet(context.Background()), c.opts.timeout()+time.Second)
	defer cancel()
	if err := c.roundTrip(ctx, p, "close", struct{}{}, nil, c.opts.timeout()); err != nil {
		p.kill()
		return
	}
	switch {
	case spare:
		// A spare whose worker ends without a crash goes back to the
		// supervisor, closed, for the next worker (Spares).
		if !c.giveBack(p) {
			p.stop()
		}
	default:
		c.opts.Pool.put(p)
	}
}

type quietKey struct{}

// quiet marks a context whose protocol errors are not told to
// Options.OnProtocolError: a pooled process that fails its close or its
// next hello is replaced by a fresh one, whose own hello judges the store.
func quiet(ctx context.Context) context.Context { return context.WithValue(ctx, quietKey{}, true) }
