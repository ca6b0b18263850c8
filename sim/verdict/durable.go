package verdict

import (
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// DurableStepRow is a result of the sweep as the report lists it.
type DurableStepRow struct {
	Name   string // "ops.create after fdatasync 1 of 2"
	Result CaseResult
}

// DurableStepsOf lists the durable-step cases of a report, in its order.
func DurableStepsOf(rep Report) []DurableStepRow {
	var out []DurableStepRow
	for _, r := range rep.Results {
		if !catalogue.IsDurableStep(r.Case) {
			continue
		}
		for _, st := range r.Case.Steps {
			if st.Durable != nil {
				name := catalogue.DurableStepName(*st.Durable)
				if st.Durable.Power {
					name += ", power loss"
				}
				out = append(out, DurableStepRow{Name: name, Result: r})
				break
			}
		}
	}
	return out
}
