package catalogue

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/crashmatrix/crashmatrix/faults"
)

// DurableStepClass is the case class of the durable-step sweep.
const DurableStepClass = "durable-step"

// DurableKill is the supervisor's kill of a worker right after the Step-th
// durable file operation of one of its store calls: with Hit set, the
// Hit-th call of Method that makes a durable file operation (what a
// scenario and explore name: it stays put when calls without durable
// steps come and go); otherwise its Call-th store call (counted as the
// worker counts them: every call through the store gate, from 1), of
// Method when that is set. Call and Hit 0 kill nothing: the worker's
// durable steps are only counted (the probe).
type DurableKill struct {
	Call   int    `json:"call" yaml:"call"`
	Method string `json:"method,omitempty" yaml:"method,omitempty"`
	Hit    int    `json:"hit,omitempty" yaml:"hit,omitempty"`
	Step   int    `json:"step" yaml:"step"`
	// Steps and Op are what the probe saw (for the case's name): how many
	// durable steps the call took, and the k-th one ("fsync").
	Steps int    `json:"steps,omitempty" yaml:"steps,omitempty"`
	Op    string `json:"op,omitempty" yaml:"op,omitempty"`
	// Power cuts the power of the case's lazy mount once the group is
	// dead: what was written and not synced at the step is lost too.
	Power bool `json:"power,omitempty" yaml:"power,omitempty"`
	// Disk, a disk error kind (faults.DiskKinds), arms that error on the
	// lazy mount right before the Step-th durable operation instead of
	// killing after it: the worker goes on (sim/diskfaults.go).
	Disk faults.Kind `json:"disk,omitempty" yaml:"disk,omitempty"`
	// Server, when set ("postgres"), counts the durable file operations
	// of that database server's data directory during the worker's store
	// calls instead, and kills the server, not the worker, right after
	// the step (sim/serverdurable.go).
	Server string `json:"server,omitempty" yaml:"server,omitempty"`
}

// DurableStepPoint is how a scenario file names a durable-step kill
// (point: durableStep): not a failpoint the worker passes, but the
// supervisor's kill right after a durable file operation (DurableKill).
const DurableStepPoint faults.Point = "durableStep"

// Targets says whether c is the call the kill names.
func (k DurableKill) Targets(c DurableCall) bool {
	if k.Hit > 0 {
		return k.Method == c.Method && k.Hit == c.Hit
	}
	return k.Call > 0 && k.Call == c.Call && (k.Method == "" || k.Method == c.Method)
}

// Kills says whether k kills at all (the probe's only counts).
func (k DurableKill) Kills() bool { return k.Call > 0 || k.Hit > 0 }

// DurableCall is one store call of a worker and the durable operations
// the lazy mount saw it make ("fsync data/pystore.db-wal").
type DurableCall struct {
	Call   int    `json:"call"`
	Method string `json:"method"`
	// Hit counts the calls of Method with a durable operation, this one
	// included (DurableKill.Hit).
	Hit int      `json:"hit,omitempty"`
	Ops []string `json:"ops"`
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
				out = append(out, DurableStepCase(DurableKill{Call: c.Call, Method: c.Method, Hit: c.Hit, Step: k, Steps: n, Op: op, Power: power}))
			}
		}
	}
	return out
}

// DurableStepName is a sweep case's row: "ops.create after fsync 1 of 2"
// (without what the probe saw, "ops.create after durable step 1"; a later
// call of the method than its first with a durable step says which,
// "ops.create (call 2) after …").
func DurableStepName(k DurableKill) string {
	m := cmp.Or(k.Method, fmt.Sprintf("store call %d", k.Call))
	if k.Hit > 1 {
		m += fmt.Sprintf(" (call %d)", k.Hit)
	}
	if k.Op == "" || k.Steps == 0 {
		return fmt.Sprintf("%s after durable step %d", m, k.Step)
	}
	return fmt.Sprintf("%s after %s %d of %d", m, k.Op, k.Step, k.Steps)
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

// ServerDurableCase is the standard script's worker with the server's
// durable steps watched during its store calls; with k naming a call and
// a step, the server is killed right after that step and started again,
// then the restart (the quiesce step). With no call named it only counts
// (sim/verdict CaseResult.DurableCalls).
func ServerDurableCase(k DurableKill) Case {
	id := fmt.Sprintf("%s-%s-probe", DurableStepClass, k.Server)
	desc := fmt.Sprintf("fault-free run of the standard script: counts the durable file operations of server %s during each store call of the worker", k.Server)
	if k.Kills() {
		id = fmt.Sprintf("%s-%s-%s-%d-%d", DurableStepClass, k.Server, k.Method, k.Hit, k.Step)
		desc = fmt.Sprintf("server %s is SIGKILLed right after its durable step %d during the worker's call %d of %s (found on its data directory's lazy mount), and started again on its data; the worker sees its server fail and goes on; recovery must finish what was made durable", k.Server, k.Step, k.Hit, k.Method)
	}
	return Case{ID: id, System: faults.Ingestion, Class: id, Kind: faults.ServerCrash, Server: k.Server, Description: desc,
		Steps: []Step{{Worker: "fault", Actions: StandardScript(), Durable: &k, ContinueOnError: true}, QuiesceStep(faults.Ingestion, "fault")}}
}
