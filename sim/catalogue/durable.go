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
	// Tear, with Power, tears what was not synced at that unit (512: disk
	// sectors, faults.TearSector) instead of dropping whole writes: the
	// torn-write variant of the power cut.
	Tear int `json:"tear,omitempty" yaml:"tear,omitempty"`
	// Disk, a disk error kind (faults.DiskKinds), arms that error on the
	// lazy mount right before the Step-th durable operation instead of
	// killing after it: the worker goes on (sim/casefaults/diskfaults.go).
	Disk faults.Kind `json:"disk,omitempty" yaml:"disk,omitempty"`
	// Server, when set ("postgres"), counts the durable file operations
	// of that database server's data directory during the worker's store
	// calls instead, and kills the server, not the worker, right after
	// the step (sim/casefaults/serverdurable.go).
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
		Steps:       durableSteps(faults.Ingestion, DurableKill{})}
}

// DurablePlanSaveProbe is DurableProbe for System B: its fault worker's
// script (a workflow started, then invoked with the approval: its
// checkpoint and plan stores' calls) with the durable steps counted.
func DurablePlanSaveProbe() Case {
	return Case{ID: "probe-durable-plansave", System: faults.PlanSave, Class: "probe",
		Description: "fault-free run of System B's script on a lazy mount: counts the durable file operations of each checkpoint and plan store call of the worker",
		Steps:       durableSteps(faults.PlanSave, DurableKill{})}
}

// MethodSystem is the system whose stores a store call belongs to:
// System B's checkpoint and plan stores (checkpoints.*, plans.*), or
// System A's.
func MethodSystem(method string) faults.System {
	if strings.HasPrefix(method, "checkpoints.") || strings.HasPrefix(method, "plans.") {
		return faults.PlanSave
	}
	return faults.Ingestion
}

// durableSteps are the steps of a durable-step case of system: its fault
// worker's script with the kill (or count) k, then the quiesce step.
func durableSteps(system faults.System, k DurableKill) []Step {
	script := StandardScript()
	if system == faults.PlanSave {
		script = PlanSaveScript()
	}
	return []Step{{Worker: "fault", Actions: script, Durable: &k}, QuiesceStep(system, "fault")}
}

// DurableStepCases is the sweep over what the probe counted: for each
// shape of store call that took two durable steps or more (SweptCalls),
// and for each gap k between two of them, the standard script's fault
// worker killed right after step k, the same with the power cut then, and
// with the power cut tearing what was not synced at 512-byte sectors;
// then the restart.
func DurableStepCases(calls []DurableCall) []Case {
	var out []Case
	for _, c := range SweptCalls(calls, 2) {
		n := len(c.Ops)
		for k := 1; k < n; k++ {
			for _, v := range withPower(DurableKill{Call: c.Call, Method: c.Method, Hit: c.Hit, Step: k, Steps: n, Op: c.Syscall(k)}) {
				out = append(out, DurableStepCase(v))
			}
		}
	}
	return out
}

// withPower are the three variants of a kill at a durable step: the kill,
// the kill with the power cut at that instant, and the same torn at
// 512-byte sectors.
func withPower(k DurableKill) []DurableKill {
	cut, torn := k, k
	cut.Power = true
	torn.Power, torn.Tear = true, faults.TearSector
	return []DurableKill{k, cut, torn}
}

// Syscall is the system call of the call's k-th durable step ("fsync").
func (c DurableCall) Syscall(k int) string {
	op, _, _ := strings.Cut(c.Ops[k-1], " ")
	return op
}

// shape is what tells two calls apart for a sweep: the method and the
// system calls of its durable steps in order, paths aside.
func (c DurableCall) shape() string {
	s := c.Method
	for k := range c.Ops {
		s += " " + c.Syscall(k+1)
	}
	return s
}

// SweptCalls are the calls a sweep covers: of the calls that took at
// least min durable steps, the first of each shape (the method and the
// system calls of its steps in order; paths aside, as a file store names
// a file per operation). A later call of a shape already swept is the
// same window again and adds only run time; one of a new shape (a method
// that syncs once more when a file grows, or renames where it first
// wrote) has windows of its own. The cases stay bounded by the shapes a
// store has, not by how many calls the script makes.
func SweptCalls(calls []DurableCall, min int) []DurableCall {
	var out []DurableCall
	done := map[string]bool{}
	for _, c := range calls {
		if len(c.Ops) < min || done[c.shape()] {
			continue
		}
		done[c.shape()] = true
		out = append(out, c)
	}
	return out
}

// DurableStepName is a sweep case's row: "ops.create after fsync 1 of 2"
// (without what the probe saw, "ops.create after durable step 1"; a later
// call of the method than its first with a durable step says which,
// "ops.create (call 2) after …"; a server's step names the server,
// "ops.create after postgres fdatasync 1 of 1").
func DurableStepName(k DurableKill) string {
	m := cmp.Or(k.Method, fmt.Sprintf("store call %d", k.Call))
	if k.Hit > 1 {
		m += fmt.Sprintf(" (call %d)", k.Hit)
	}
	if k.Server != "" {
		m += " after " + k.Server
	} else {
		m += " after"
	}
	if k.Op == "" || k.Steps == 0 {
		return fmt.Sprintf("%s durable step %d", m, k.Step)
	}
	return fmt.Sprintf("%s %s %d of %d", m, k.Op, k.Step, k.Steps)
}

// tag is what a case ID says of its kill: "ops.create-1-of-2", with the
// call when it is not the method's first with a durable step
// ("ops.create-call3-1-of-2").
func (k DurableKill) tag() string {
	m := k.Method
	if k.Hit > 1 {
		m += fmt.Sprintf("-call%d", k.Hit)
	}
	return fmt.Sprintf("%s-%d-of-%d", m, k.Step, k.Steps)
}

// DurableStepCase is the standard script's fault worker SIGKILLed, with
// its store processes, right after the k-th durable step of one store
// call (and, with k.Power, the power of the case's lazy mount cut then),
// then the restart. Each is a class row of its own,
// "durable-step-ops.create-1-of-2" and "…-1-of-2-power-loss".
func DurableStepCase(k DurableKill) Case {
	name := DurableStepClass + "-" + k.tag()
	sys := MethodSystem(k.Method)
	c := Case{ID: name, System: sys, Class: name, Kind: faults.Crash,
		Description: fmt.Sprintf("%s: the standard script's worker and its store processes are SIGKILLed right after durable step %d of %d (%s) of its store call %d, found on the lazy mount, not declared by the store; recovery must finish what the store made durable",
			DurableStepName(k), k.Step, k.Steps, k.Op, k.Call),
		Steps: durableSteps(sys, k)}
	switch {
	case k.Power && k.Tear > 0:
		c.ID += fmt.Sprintf("-%s-%d", faults.TornWrite, k.Tear)
		c.Class, c.Kind = c.ID, faults.TornWrite
		c.Description = fmt.Sprintf("%s, torn write: the standard script's worker and its store processes are SIGKILLed right after durable step %d of %d (%s) of its store call %d, found on the lazy mount, and what was not synced then is torn at %s; recovery must finish what the store made durable",
			DurableStepName(k), k.Step, k.Steps, k.Op, k.Call, faults.TearName(k.Tear))
	case k.Power:
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
// of it for the whole matrix or the class durable-step, a server's for
// durable-step-SERVER, one case for its own class, none for a point or
// kind.
func (s Selection) durableSteps(cases []Case) []Case {
	if len(s.Points) > 0 || len(s.Kinds) > 0 {
		return nil
	}
	if len(s.Classes) == 0 || slices.Contains(s.Classes, DurableStepClass) {
		return cases
	}
	// "durable-step-postgres" selects one server's sweep.
	return slices.DeleteFunc(cases, func(c Case) bool {
		return !slices.Contains(s.Classes, c.Class) && (c.Server == "" || !slices.Contains(s.Classes, DurableStepClass+"-"+c.Server))
	})
}
