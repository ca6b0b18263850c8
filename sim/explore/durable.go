package explore

import (
	"math/rand"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Kills after durable steps: where the probe saw a store call make two
// durable file operations or more on the lazy mount (catalogue.DurableCall, a
// gap no declared window may name), a client without faults of its own is
// killed right after the k-th of them in one of its calls of that method
// (catalogue.DurableKill: the method, its call among those that made a durable
// step, the step), and, a PowerLoss share of the time, the power is cut
// then too. Its finding replays from a scenario (point durableStep) and
// shrinks like any fault: dropped, moved to the method's first call, or
// made a plain kill.

// gapped is a store method whose call took two durable steps or more in
// the probe, with what it took.
type gapped struct {
	method string
	ops    []string
}

// gappedCalls are the methods of calls that took two durable steps or
// more, each once (its first such call), in the probe's order.
func gappedCalls(calls []catalogue.DurableCall) []gapped {
	var out []gapped
	for _, c := range calls {
		if len(c.Ops) >= 2 && !slices.ContainsFunc(out, func(g gapped) bool { return g.method == c.Method }) {
			out = append(out, gapped{c.Method, c.Ops})
		}
	}
	return out
}

// killAfterDurableSteps arms the durable-step kills of a schedule. Its
// draws come after every other draw of the schedule, so that a schedule
// of a store whose calls sync once each is what it always was.
func killAfterDurableSteps(r *rand.Rand, c *catalogue.Case, clients int, shape Shape) {
	gs := gappedCalls(shape.DurableCalls)
	if shape.DurableKill <= 0 || len(gs) == 0 {
		return
	}
	for j := 0; j < clients; j++ {
		st := &c.Steps[j]
		if r.Float64() >= shape.DurableKill {
			continue
		}
		// A worker that dies or stalls by another fault would never reach
		// the step (the case would not be exercised).
		if len(st.Arms) > 0 || st.Background || st.Kill != nil {
			continue
		}
		g := pick(r, gs)
		k := 1 + r.Intn(len(g.ops)-1)
		op, _, _ := strings.Cut(g.ops[k-1], " ")
		st.Durable = &catalogue.DurableKill{Method: g.method, Hit: 1 + r.Intn(len(st.Actions)), Step: k, Steps: len(g.ops), Op: op,
			Power: shape.PowerLoss > 0 && r.Float64() < shape.PowerLoss}
	}
}

// durableCandidates are the reductions of a step's durable-step kill:
// without it, at the method's first call, without the power cut.
func durableCandidates(c catalogue.Case, i int) []catalogue.Case {
	k := c.Steps[i].Durable
	if k == nil {
		return nil
	}
	var out []catalogue.Case
	with := func(f func(*catalogue.Step)) {
		d := clone(c)
		f(&d.Steps[i])
		out = append(out, d)
	}
	with(func(st *catalogue.Step) { st.Durable = nil })
	if k.Hit > 1 {
		with(func(st *catalogue.Step) { st.Durable.Hit = 1 })
	}
	if k.Power {
		with(func(st *catalogue.Step) { st.Durable.Power = false })
	}
	return out
}

// durableScore is what a durable-step kill adds to simpler's score.
func durableScore(k *catalogue.DurableKill) int {
	n := 0
	if k != nil && k.Hit > 1 {
		n++
	}
	if k != nil && k.Power {
		n++
	}
	return n
}
