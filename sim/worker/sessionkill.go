package worker

import "github.com/crashmatrix/crashmatrix/internal/procstat"

// Adopter is a backend's record of processes the supervisor started ahead
// of need and handed to a worker (sim/storecmd's store spares): they are
// members of the worker's session in all but name. Whatever the
// supervisor does to a worker's session (kills it, finds its store
// processes in a sync, watches their durable steps) it does to them too.
type Adopter struct {
	// Kill ends the processes adopted by the worker that leads session
	// sid, with their groups, and returns once they are gone. The
	// supervisor calls it after its SIGKILLs to the session, before the
	// worker is reaped and its case goes on.
	Kill func(sid int)
	// SessionOf returns the session that adopted process group pgid; 0
	// when none did.
	SessionOf func(pgid int) int
}

var adopters []Adopter

// RegisterAdopter registers a. Call it from an init function.
func RegisterAdopter(a Adopter) { adopters = append(adopters, a) }

// InSession reports whether the process st describes belongs to session
// sid: a member of it, or adopted by the worker that leads it.
func InSession(st procstat.Stat, sid int) bool {
	if st.Session == sid {
		return true
	}
	for _, a := range adopters {
		if a.SessionOf(st.PGRP) == sid {
			return true
		}
	}
	return false
}

// KillAdopted ends what the worker that leads session sid adopted.
func KillAdopted(sid int) {
	for _, a := range adopters {
		a.Kill(sid)
	}
}
