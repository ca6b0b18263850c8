package serverfaults

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
)

// How long the faults that hold a worker's request past its lease
// (server-pause, partition, clock-jump) wait and hold, in wall time.
const (
	// SendWait bounds the wait for the faulted worker's next request
	// after its window: a hold that saw none held nothing, and does not
	// count as fired.
	SendWait = 5 * time.Second
	// FreezeFor is how long a server-pause keeps the server stopped after
	// the worker's request went out to it (and the case's clock moved
	// past the lease), at least: the worker that takes over is started
	// meanwhile, and its connection waits on the stopped server too.
	FreezeFor = time.Second
	// ParkWait bounds the wait, after a server-pause resumed the server or
	// a clock jump's first request went out, for the worker's next request
	// (held: the worker is parked) before the case's next worker starts.
	ParkWait = 2 * time.Second
	// HoldCap bounds how long the holder stays held after the fault took
	// effect, when the case's next worker is not done by then (it may wait
	// on a row lock the holder's open transaction keeps).
	HoldCap = 20 * time.Second
	// ClockJumpBy is how far clock-jump moves the server's clock forward
	// (a production report: a node's clock jumped 7.5 hours ahead).
	ClockJumpBy = 7*time.Hour + 30*time.Minute
)

// placedToxic is a hold toxic on a proxy, and which of its links it
// holds (HoldToxic.Links).
type placedToxic struct {
	p     *toxiproxy.Proxy
	name  string
	links string
}

// heldFault is one server-pause, partition or clock-jump of a case run,
// from its window until it heals.
type heldFault struct {
	req    sim.ServerFaultRequest
	srv    *Server
	h      *hold
	id     string
	toxics []placedToxic
	armed  time.Time

	stopOnce sync.Once
	stop     chan struct{} // StopFaults: heal now
	done     chan struct{} // healed and recorded
}

// hold arms a fault that holds the worker's request past its lease: the
// hold toxics on the case's proxy (the links open now are the worker's),
// then the server stopped (server-pause) or its clock moved
// (clock-jump). It returns at once, so that the worker sends its next
// request; carryOut does the rest.
func (c *caseServers) hold(ctx context.Context, req sim.ServerFaultRequest, act faults.Action) error {
	if why := c.s.Untested(act.Kind, act.Server); why != "" {
		return fmt.Errorf("%s: %s", act, why)
	}
	c.s.mu.Lock()
	srv := c.s.servers[act.Server]
	c.s.mu.Unlock()
	p := c.proxies[act.Server]
	c.mu.Lock()
	c.n++
	n := c.n
	c.mu.Unlock()
	hf := &heldFault{req: req, srv: srv, h: newHold(act.Kind == faults.Partition, act.Kind == faults.Partition), stop: make(chan struct{}), done: make(chan struct{})}
	hf.id = holds.add(hf.h)
	undo := func() {
		hf.h.heal()
		for _, t := range hf.toxics {
			_ = t.p.Toxics.RemoveToxic(context.Background(), t.name)
		}
		holds.drop(hf.id)
	}
	// The links open now on the case's proxy are the worker's; a worker
	// with proxies of its own (ownproxy.go) has all its links there, and
	// a partition holds every one of them, those it opens later too.
	targets := []placedToxic{{p: p, links: linksAtArming}}
	if own := c.ownProxy(req.Worker, act.Server); own != nil && act.Kind == faults.Partition {
		targets = []placedToxic{{p: own, links: linksAll}, {p: p, links: linksNone}}
	}
	hf.h.adding.Store(true)
	for _, tg := range targets {
		for _, dir := range []string{"upstream", "downstream"} {
			tg.name = fmt.Sprintf("%s-%d-%s", act.Kind, n, dir)
			b, _ := json.Marshal(map[string]any{"name": tg.name, "type": ToxicHold, "stream": dir, "toxicity": 1.0,
				"attributes": map[string]any{"hold": hf.id, "upstream": dir == "upstream", "protocol": srv.Protocol, "links": tg.links}})
			if _, err := tg.p.Toxics.AddToxicJson(bytes.NewReader(b)); err != nil {
				hf.h.adding.Store(false)
				undo()
				return fmt.Errorf("arm %s on the %s proxy: %w", act.Kind, act.Server, err)
			}
			hf.toxics = append(hf.toxics, tg)
		}
	}
	hf.h.adding.Store(false)
	hf.armed = time.Now()
	switch act.Kind {
	case faults.ServerPause:
		if err := srv.Pause(ctx); err != nil {
			undo()
			return fmt.Errorf("stop %s: %w", act.Server, err)
		}
	case faults.ClockJump:
		if err := srv.SetClock(ctx, ClockJumpBy); err != nil {
			undo()
			return fmt.Errorf("move %s's clock %s forward: %w", act.Server, ClockJumpBy, err)
		}
	}
	c.mu.Lock()
	c.held = append(c.held, hf)
	c.mu.Unlock()
	go func() {
		defer close(hf.done)
		defer undo()
		took, err := c.takeEffect(hf, act)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		// The record of the fault taking effect lets the case's next
		// worker start (it takes the lease over).
		c.record(req, act.Server+": "+took, msg)
		if err != nil {
			return
		}
		c.record(req, act.Server+": "+c.heal(hf, act), "")
	}()
	return nil
}

// takeEffect waits for the worker's request, moves the case's clock past
// the lease, and, for a server-pause, resumes the server a little later;
// it says what happened, and fails when the fault held nothing (no request
// of the worker's was in flight).
func (c *caseServers) takeEffect(hf *heldFault, act faults.Action) (string, error) {
	h := hf.h
	var notes []string
	switch act.Kind {
	case faults.ServerPause:
		notes = append(notes, "stopped (SIGSTOP: its container frozen) at the window")
	case faults.Partition:
		notes = append(notes, fmt.Sprintf("the worker's %d connection(s) held silent at the window", h.armedLinks()))
	case faults.ClockJump:
		notes = append(notes, fmt.Sprintf("its clock moved %s forward at the window", ClockJumpBy))
	}
	sent := false
	select {
	case <-h.sent:
		sent = true
		notes = append(notes, fmt.Sprintf("the worker's next request (%d bytes) went out %s later", h.sentLen(), time.Since(hf.armed).Round(time.Millisecond)))
	case <-time.After(SendWait):
		notes = append(notes, fmt.Sprintf("no request of the worker's went out on its connections within %s", SendWait))
	case <-hf.stop:
		notes = append(notes, "faults stopped before the worker sent anything")
	}
	var err error
	if !sent && act.Kind != faults.ClockJump {
		err = fmt.Errorf("%s held no request of the worker's", act.Kind)
	}
	if err == nil && act.Kind != faults.ClockJump && c.sc.PastLease != nil {
		moved, wall := c.sc.PastLease()
		if moved > 0 {
			notes = append(notes, fmt.Sprintf("the case's clock moved %s on (past the lease)", moved))
		}
		if act.Kind == faults.ServerPause {
			c.wait(hf, max(wall, FreezeFor), nil, "")
		} else {
			c.wait(hf, wall, nil, "")
		}
	}
	if act.Kind != faults.Partition {
		// From now on what the worker sends is held: it gets the reply
		// to its request in flight (recorded in its history at once, in
		// the order the server ran it), and stays parked at its next
		// request while the case's next worker takes the lease over.
		h.cutUp.Store(true)
	}
	if act.Kind == faults.ServerPause {
		ctx, cancel := context.WithTimeout(context.Background(), RestartBudget)
		defer cancel()
		if rerr := hf.srv.Resume(ctx); rerr != nil {
			err = errors.Join(err, fmt.Errorf("resume %s: %w", act.Server, rerr))
		}
		notes = append(notes, fmt.Sprintf("resumed (SIGCONT) %s after the stop", time.Since(hf.armed).Round(time.Millisecond)))
	}
	if act.Kind != faults.Partition && err == nil {
		if c.wait(hf, ParkWait, h.held, "") {
			notes = append(notes, "the worker's next request held")
		} else {
			notes = append(notes, fmt.Sprintf("the worker sent nothing more within %s", ParkWait))
		}
	}
	return strings.Join(notes, "; "), err
}

// heal keeps the holder parked (its replies held, and for a partition its
// requests too) until the case's next worker is done (its release file) or
// HoldCap, noting whether another connection committed meanwhile, then
// heals: the partition opens, the replies pass, the clock goes back.
func (c *caseServers) heal(hf *heldFault, act faults.Action) string {
	h := hf.h
	start := time.Now()
	released := c.wait(hf, HoldCap, nil, sim.ReleaseFile(c.sc.History, hf.req.Phase))
	var notes []string
	select {
	case <-h.otherCommit:
		notes = append(notes, fmt.Sprintf("another connection committed a write (%s) while the worker was held", h.otherWhat()))
	default:
		notes = append(notes, "no other connection committed a write while the worker was held")
	}
	why := fmt.Sprintf("after %s, capped", HoldCap)
	if released {
		why = "once the next worker was done"
	}
	h.heal()
	chunks, n := h.heldCount()
	notes = append(notes, fmt.Sprintf("healed %s (%s after the window; %s later): %d chunk(s), %d bytes held passed on", why, time.Since(hf.armed).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), chunks, n))
	if act.Kind == faults.ClockJump {
		ctx, cancel := context.WithTimeout(context.Background(), RestartBudget)
		defer cancel()
		if err := hf.srv.SetClock(ctx, 0); err != nil {
			notes = append(notes, fmt.Sprintf("moving its clock back failed: %v", err))
		} else {
			notes = append(notes, "its clock moved back")
		}
	}
	return strings.Join(notes, "; ")
}

// wait waits d, or until ch closes, or the file appears (true for
// either), or until faults stop.
func (c *caseServers) wait(hf *heldFault, d time.Duration, ch <-chan struct{}, file string) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-t.C:
			return false
		case <-hf.stop:
			return false
		case <-ch:
			return true
		case <-tick.C:
			if file != "" {
				if _, err := os.Stat(file); err == nil {
					return true
				}
			}
		}
	}
}

// healAll heals every hold of the case at once and waits until each is
// healed and recorded (faults stop before the final recovery).
func (c *caseServers) healAll() {
	c.mu.Lock()
	held := c.held
	c.held = nil
	c.mu.Unlock()
	for _, hf := range held {
		hf.stopOnce.Do(func() { close(hf.stop) })
		<-hf.done
	}
}
