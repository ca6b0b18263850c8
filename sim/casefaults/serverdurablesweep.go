package casefaults

import (
	"slices"
)

// The sweep of the servers' own durable steps (catalogue.ServerDurableCases):
// where the servers' data directories are on lazy mounts the supervisor
// serves (--backend containers with the power-loss column), the probe runs
// the standard script once per server with that server's durable file
// operations counted per store call of the worker; the matrix kills the
// server right after each of them (sim/casefaults/serverdurable.go).

// ServerDurableSweepable names the servers whose durable steps the runner
// can watch and kill at (none when it cannot: an embedded backend, the
// in-process mode, servers without lazy mounts).
func (f *Faults) ServerDurableSweepable() []string {
	if _, ok := f.run.ServerFaults.(ServerDurable); !ok || f.run.InProcess || f.run.Backend.Embedded || f.PowerLossUntested() != "" {
		return nil
	}
	sd := f.run.ServerFaults.(ServerDurable)
	var names []string
	for s := range f.run.ServerFaults.Direct() {
		// A server whose data mount cannot be heard says so here.
		if sd.WatchDurable(s, nil) == nil {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	return names
}

// ServerProbeRuns is how many probe runs of a server must agree on a
// call's durable steps for the sweep to take it.
const ServerProbeRuns = 2
