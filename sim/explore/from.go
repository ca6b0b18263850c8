package explore

import (
	"math/rand"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/initial"
)

// ScheduleFrom returns the index-th schedule of a seed that starts from an
// initial state (a snapshot of a real store): the schedule Schedule
// generates, loaded on top of st, after a recovery worker that meets
// st's unfinished operations first under a fault of its own (any
// ingestion window: recovery resumes through the client windows too);
// each client may also resume one of them, as a caller retrying by
// operationId would. Deterministic in (seed, index, st).
func ScheduleFrom(seed int64, index int, shape Shape, st *initial.State) catalogue.Case {
	c := Schedule(seed, index, shape)
	if c.System != faults.Ingestion {
		// Plan-save schedules do not touch System A's stores; draw an
		// ingestion one instead.
		shape.PlanSave = 0
		c = Schedule(seed, index, shape)
	}
	c.Initial = st
	c.Description = "a generated fault schedule from an initial state"
	r := rand.New(rand.NewSource(seed*1_000_003 + int64(index) + 1))
	rec := catalogue.Step{Worker: "r0", Actions: []catalogue.Action{{Do: "recover", Rounds: 3}}, ContinueOnError: true}
	spec := pick(r, recoveryPoints())
	if a := arm(r, spec, shape); a.Kind != faults.Pause {
		rec.Arms = faults.Arms{spec.Point: a}
	}
	if unfinished := st.Unfinished(); len(unfinished) > 0 {
		for i := range c.Steps {
			step := &c.Steps[i]
			if step.Worker == "quiesce" || step.Worker == "r1" || r.Intn(2) == 0 {
				continue
			}
			op := pick(r, unfinished)
			step.Actions = append([]catalogue.Action{{Do: "resume", Op: op}}, step.Actions...)
		}
	}
	c.Steps = append([]catalogue.Step{rec}, c.Steps...)
	return c
}

// schedule is the index-th schedule of the options.
func (o Options) schedule(index int) catalogue.Case {
	if o.Initial != nil {
		return ScheduleFrom(o.Seed, index, o.Shape, o.Initial)
	}
	return Schedule(o.Seed, index, o.Shape)
}
