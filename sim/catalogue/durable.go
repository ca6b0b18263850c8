package catalogue

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

// DurableStepClass is the case class of the durable-step sweep.
const DurableStepClass = "durable-step"

// DurableKill is the supervisor's kill of a worker right after the Step-th
// durable file operation of its Call-th store call (counted as the worker
// counts them: every call through the store gate, from 1). Call 0 kills
// nothing: the worker's durable steps are only counted (the probe).
type DurableKill struct {
	Call   int    `json:"call" yaml:"call"`
	Method string `json:"method,omitempty" yaml:"method,omitempty"`
	Step   int    `json:"step" yaml:"step"`
	// Steps and Op are what the probe saw (for the case's name): how many
	// durable steps the call took, and the k-th one ("fsync").
	Steps int    `json:"steps,omitempty" yaml:"steps,omitempty"`
	Op    string `json:"op,omitempty" yaml:"op,omitempty"`
	// Power cuts the power of the case's lazy mount once the group is
	// dead: what was written and not synced at the step is lost too.
	Power bool `json:"power,omitempty" yaml:"power,omitempty"`
}

// DurableCall is one store call of a worker and the durable operations
// the lazy mount saw it make ("fsync data/pystore.db-wal").
type DurableCall struct {
	Call   int      `json:"call"`
	Method string   `json:"method"`
	Ops    []string `json:"ops"`
}

// DurableProbe is the standard script's fault worker on a lazy mount with
// its durable steps counted, then the quiesce step.
func DurableProbe() Case {
	return Case{ID: "probe-durable", System: faults.Ingestion, Class: "probe",
		Description: "fault-free run of the standard script on a lazy mount: counts the durable file operations of each store call of the worker",
		Steps:       []Step{{Worker: "fault", Actions: StandardScript(), Durable: &DurableKill{}}, QuiesceStep(faults.Ingestion, "fault")}}
}

// DurableStepCases is the sweep over what the probe counted: for each
// store method, its first call that took two durable steps or more, and
// for each gap k between two of them, the standard script's fault worker
// killed right after step k, then the restart.
func DurableStepCases(calls []DurableCall) []Case {
	var out []Case
	done := map[string]bool{}
	for _, c := range calls {
		n := len(c.Ops)
		if n < 2 || done[c.Method] {
			continue
		}
		done[c.Method] = true
		for k := 1; k < n; k++ {
			op, _, _ := strings.Cut(c.Ops[k-1], " ")
			for _, power := range []bool{false, true} {
				out = append(out, DurableStepCase(DurableKill{Call: c.Call, Method: c.Method, Step: k, Steps: n, Op: op, Power: power}))
			}
		}
	}
	return out
}

// DurableStepName is a sweep case's row: "ops.create after fsync 1 of 2".
func DurableStepName(k DurableKill) string {
	return fmt.Sprintf("%s after %s %d of %d", k.Method, k.Op, k.Step, k.Steps)
}

// DurableStepCase is the standard script's fault worker SIGKILLed, with
// its store processes, right after the k-th durable step of one store
// call (and, with k.Power, the power of the case's lazy mount cut then),
// then the restart. Each is a class row of its own,
// "durable-step-ops.create-1-of-2" and "…-1-of-2-power-loss".
func DurableStepCase(k DurableKill) Case {
	name := fmt.Sprintf("%s-%s-%d-of-%d", DurableStepClass, k.Method, k.Step, k.Steps)
	c := Case{ID: name, System: faults.Ingestion, Class: name, Kind: faults.Crash,
		Description: fmt.Sprintf("%s: the standard script's worker and its store processes are SIGKILLed right after durable step %d of %d (%s) of its store call %d, found on the lazy mount, not declared by the store; recovery must finish what the store made durable",
			DurableStepName(k), k.Step, k.Steps, k.Op, k.Call),
		Steps: []Step{{Worker: "fault", Actions: StandardScript(), Durable: &k}, QuiesceStep(faults.Ingestion, "fault")}}
	if k.Power {
		c.ID += "-" + string(faults.PowerLoss)
		c.Class, c.Kind = c.ID, faults.PowerLoss
		c.Description = fmt.Sprintf("%s, power loss: the standard script's worker and its store processes are SIGKILLed right after durable step %d of %d (%s) of its store call %d, found on the lazy mount, and everything not synced then is lost; recovery must finish what the store made durable",
			DurableStepName(k), k.Step, k.Steps, k.Op, k.Call)
	}
	return c
}

// IsDurableStep reports whether c is a case of the durable-step sweep.
func IsDurableStep(c Case) bool { return strings.HasPrefix(c.Class, DurableStepClass+"-") }

// durableSteps narrows the sweep as betweenCalls narrows its cases: all
// of it for the whole matrix or the class durable-step, one case for its
// own class, none for a point or kind.
func (s Selection) durableSteps(cases []Case) []Case {
	if len(s.Points) > 0 || len(s.Kinds) > 0 {
		return nil
	}
	if len(s.Classes) == 0 || slices.Contains(s.Classes, DurableStepClass) {
		return cases
	}
	return slices.DeleteFunc(cases, func(c Case) bool { return !slices.Contains(s.Classes, c.Class) })
}
