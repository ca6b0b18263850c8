package verdict

import (
	"fmt"

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
				switch {
				case st.Durable.Power && st.Durable.Tear > 0:
					name += fmt.Sprintf(", torn write (%d)", st.Durable.Tear)
				case st.Durable.Power:
					name += ", power loss"
				}
				if st.Durable.Disk != "" {
					name += ", " + string(st.Durable.Disk)
				}
				out = append(out, DurableStepRow{Name: name, Result: r})
				break
			}
		}
	}
	return out
}
