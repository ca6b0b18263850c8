package sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/casefaults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// The probes of the durable-step sweeps (sim/casefaults/durable.go,
// sim/casefaults/serverdurablesweep.go): the standard script run without a
// fault, its durable file operations counted per store call.

// probeDurable runs the durable-step probes where the runner can: System
// A's standard script, and System B's where the backend has its stores
// (their calls are told apart by method: catalogue.MethodSystem).
func (r *Runner) probeDurable(ctx context.Context) ([]catalogue.DurableCall, []verdict.CaseResult, error) {
	if !r.outside.DurableSweepable() {
		return nil, nil, nil
	}
	probes := []catalogue.Case{catalogue.DurableProbe()}
	if r.backend.OpenPlanSave != nil {
		probes = append(probes, catalogue.DurablePlanSaveProbe())
	}
	var calls []catalogue.DurableCall
	var results []verdict.CaseResult
	for _, c := range probes {
		if r.serviceCannot(c) {
			continue
		}
		res := r.RunCase(ctx, c)
		results = append(results, res)
		if res.Verdict != verdict.Pass {
			return nil, results, fmt.Errorf("probe %s: %s without any fault: %s %s", c.ID, res.Verdict, strings.Join(res.Broken(), ","), strings.Join(res.Notes, "; "))
		}
		calls = append(calls, res.DurableCalls...)
	}
	return calls, results, nil
}

// probeServerDurable runs the probe of each server's durable steps where
// the runner can, twice: server name -> the store calls during which it
// made one on both runs alike (catalogue.StableCalls), and what it made.
func (r *Runner) probeServerDurable(ctx context.Context) (map[string][]catalogue.DurableCall, []verdict.CaseResult, error) {
	servers := r.outside.ServerDurableSweepable()
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
		for range casefaults.ServerProbeRuns {
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
