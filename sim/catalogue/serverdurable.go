package catalogue

import (
	"fmt"
	"maps"
	"slices"

	"github.com/crashmatrix/crashmatrix/faults"
)

// The durable steps of a database server (--backend containers with its
// data directories on lazy mounts): what runs them is sim/casefaults/serverdurable.go.

// ServerDurableCase is the standard script's worker with the server's
// durable steps watched during its store calls; with k naming a call and
// a step, the server is killed right after that step and started again,
// then the restart (the quiesce step): "durable-step-postgres-ops.create-1-of-1".
// With k.Power the power of the server's data mount goes at that same
// instant (what the server had not synced is lost: "…-1-of-1-power-loss"),
// and with k.Tear too it is torn at that unit ("…-1-of-1-torn-write-512").
// With no call named it only counts (sim/verdict CaseResult.DurableCalls):
// the probe "probe-durable-postgres".
func ServerDurableCase(k DurableKill) Case {
	steps := []Step{{Worker: "fault", Actions: StandardScript(), Durable: &k, ContinueOnError: true}, QuiesceStep(faults.Ingestion, "fault")}
	if !k.Kills() {
		return Case{ID: "probe-durable-" + k.Server, System: faults.Ingestion, Class: "probe", Steps: steps,
			Description: fmt.Sprintf("fault-free run of the standard script: counts the durable file operations of server %s during each store call of the worker", k.Server)}
	}
	id := fmt.Sprintf("%s-%s-%s", DurableStepClass, k.Server, k.tag())
	kind, what := faults.ServerCrash, fmt.Sprintf("server %s is SIGKILLed", k.Server)
	switch {
	case k.Power && k.Tear > 0:
		id += fmt.Sprintf("-%s-%d", faults.TornWrite, k.Tear)
		kind, what = faults.TornWrite, fmt.Sprintf("server %s is SIGKILLed and the power of its data directory's lazy mount cut (what it had not synced is torn at %s)", k.Server, faults.TearName(k.Tear))
	case k.Power:
		id += "-" + string(faults.PowerLoss)
		kind, what = faults.PowerLoss, fmt.Sprintf("server %s is SIGKILLed and the power of its data directory's lazy mount cut (what it had not synced is lost)", k.Server)
	}
	return Case{ID: id, System: faults.Ingestion, Class: id, Kind: kind, Server: k.Server, Steps: steps,
		Description: fmt.Sprintf("%s: %s right after its durable step %d of %d (%s) during the worker's call %d of %s (found on its data directory's lazy mount, not declared), before it answers, and started again on its data; the worker sees its server fail and goes on; recovery must finish what was made durable",
			DurableStepName(k), what, k.Step, k.Steps, k.Op, k.Hit, k.Method)}
}

// ServerDurableCases is the sweep of a server's own durable steps, over
// what its probe counted: for each shape of store call during which the
// server made a durable step (SweptCalls), and each of those steps, the
// last included, a case that kills the server right after it, one that
// cuts the power of its data mount at that instant too, and one that
// tears what it had not synced then at 512-byte sectors, as the worker
// sweep does (DurableStepCases). Unlike a store's own files, a call with
// one step has a window here: the server dies with the commit on its
// disk and its answer unsent.
func ServerDurableCases(server string, calls []DurableCall) []Case {
	var out []Case
	for _, c := range SweptCalls(calls, 1) {
		for k := 1; k <= len(c.Ops); k++ {
			for _, v := range withPower(DurableKill{Call: c.Call, Method: c.Method, Hit: c.Hit, Step: k, Steps: len(c.Ops), Op: c.Syscall(k), Server: server}) {
				out = append(out, ServerDurableCase(v))
			}
		}
	}
	return out
}

// StableCalls are the calls of a that b saw alike: the same call of the
// same method (Hit) with durable steps of the same shape. A server's
// background work (a WAL writer's flush, a checkpoint) lands in whatever
// store call is going on; two probe runs that agree leave it out, and a
// sweep case drawn from it would not be exercised.
func StableCalls(a, b []DurableCall) []DurableCall {
	var out []DurableCall
	for _, c := range a {
		if slices.ContainsFunc(b, func(o DurableCall) bool { return o.Method == c.Method && o.Hit == c.Hit && o.shape() == c.shape() }) {
			out = append(out, c)
		}
	}
	return out
}

// serverDurable are the sweeps of every server the probe watched, servers
// in name order.
func serverDurable(probed map[string][]DurableCall) []Case {
	var out []Case
	for _, s := range slices.Sorted(maps.Keys(probed)) {
		out = append(out, ServerDurableCases(s, probed[s])...)
	}
	return out
}

// IsServerDurableStep reports whether c kills a server at its durable step.
func IsServerDurableStep(c Case) bool {
	return IsDurableStep(c) && slices.ContainsFunc(c.Steps, func(st Step) bool { return st.Durable != nil && st.Durable.Server != "" })
}
