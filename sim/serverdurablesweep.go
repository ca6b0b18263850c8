package sim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The sweep of the servers' own durable steps (catalogue.ServerDurableCases):
// where the servers' data directories are on lazy mounts the supervisor
// serves (--backend containers with the power-loss column), the probe runs
// the standard script once per server with that server's durable file
// operations counted per store call of the worker; the matrix kills the
// server right after each of them (sim/serverdurable.go).

// serverDurableSweepable names the servers whose durable steps the runner
// can watch and kill at (none when it cannot: an embedded backend, the
// in-process mode, servers without lazy mounts; of the containers,
// PostgreSQL only: sim/servers/provision says why not Neo4j).
func (r *Runner) serverDurableSweepable() []string {
	if _, ok := r.cfg.ServerFaults.(ServerDurable); !ok || r.cfg.InProcess || r.backend.Embedded || r.PowerLossUntested() != "" {
		return nil
	}
	sd := r.cfg.ServerFaults.(ServerDurable)
	var names []string
	for s := range r.cfg.ServerFaults.Direct() {
		// A server whose data mount cannot be heard says so here.
		if sd.WatchDurable(s, nil) == nil {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	return names
}

// probeServerDurable runs the probe of each server's durable steps where
// the runner can, twice: server name -> the store calls during which it
// made one on both runs alike (catalogue.StableCalls), and what it made.
func (r *Runner) probeServerDurable(ctx context.Context) (map[string][]catalogue.DurableCall, []verdict.CaseResult, error) {
	servers := r.serverDurableSweepable()
	if len(servers) == 0 {
		return nil, nil, nil
	}
	out := map[string][]catalogue.DurableCall{}
	var results []verdict.CaseResult
	for _, s := range servers {
		c := catalogue.ServerDurableCase(catalogue.DurableKill{Server: s})
		if r.serviceCannot(c) {
			continue
		}
		var runs [][]catalogue.DurableCall
		for range serverProbeRuns {
			res := r.RunCase(ctx, c)
			results = append(results, res)
			if res.Verdict != verdict.Pass {
				return out, results, fmt.Errorf("probe %s: %s without any fault: %s %s", c.ID, res.Verdict, strings.Join(res.Broken(), ","), strings.Join(res.Notes, "; "))
			}
			runs = append(runs, res.DurableCalls)
		}
		out[s] = catalogue.StableCalls(runs[0], runs[1])
	}
	return out, results, nil
}

// serverProbeRuns is how many probe runs of a server must agree on a
// call's durable steps for the sweep to take it.
const serverProbeRuns = 2
