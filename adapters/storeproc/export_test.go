package storeproc

import "os"

// What the external tests look at inside (spares_test.go).

// ReadyCount is how many spares wait for a worker.
func (sp *Spares) ReadyCount() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	n := 0
	for _, ps := range sp.ready {
		n += len(ps)
	}
	return n
}

// Pending is how many spares wait for a worker or are starting.
func (sp *Spares) Pending() int {
	n := sp.ReadyCount()
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, k := range sp.starting {
		n += k
	}
	return n
}

// StorePID is the pid of the store process the client talks to (Procs 1,
// not in a call).
func (c *Client) StorePID() int {
	p := <-c.pool
	c.pool <- p
	return p.pid
}

// AdoptedProcs are the spares handed to session sid: their pids, and a
// function that says how each ended: running is true while one runs, and
// err is how it exited (nil for exit status 0).
func AdoptedProcs(sid int) (pids []int, ended func() []Ended) {
	srv.mu.Lock()
	ps := srv.adopted[sid]
	srv.mu.Unlock()
	for _, p := range ps {
		pids = append(pids, p.pid)
	}
	return pids, func() []Ended {
		var out []Ended
		for _, p := range ps {
			select {
			case <-p.exited:
				out = append(out, Ended{Err: p.waitErr})
			default:
				out = append(out, Ended{Running: true})
			}
		}
		return out
	}
}

// Ended is how an adopted spare ended (AdoptedProcs).
type Ended struct {
	Running bool
	Err     error
}

// AskOwnService asks this process's own spare service for a spare of
// command, as a worker asks its parent's: true if it got one.
func AskOwnService(command, dir string) bool {
	c := &Client{opts: Options{Command: command, Dir: dir}}
	p := c.adopt(spareAddr(os.Getpid()))
	if p != nil {
		p.kill()
	}
	return p != nil
}
