// Package scenarios reads and writes crashmatrix scenario files: named,
// reproducible cases in YAML (see SCHEMA.md) that pin a crash window, a
// failure class or a past bug, together with the outcome they expect.
//
// Load and Parse decode a file strictly and validate it; every error names
// the file, line, column and field path. Case turns a scenario into the
// simulator's catalogue.Case, Apply puts its run settings into a sim.Config,
// Judge compares a run's outcome with the expectation, and Marshal writes
// the canonical form (what the explorer uses for shrunk scenarios).
package scenarios

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/initial"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// Scenario is one scenario file.
type Scenario struct {
	// Name identifies the scenario ([a-z0-9-]+); it becomes the case ID.
	Name        string
	Description string
	// System is faults.Ingestion (the default) or faults.PlanSave.
	System faults.System
	// Backend, when set, names the backend the scenario must run on
	// (sqlite, memory, postgres, containers); empty means any.
	Backend string
	// Bugs are service mutants (reference.Bugs) switched on for the run.
	Bugs []reference.Bug
	// Service, when set, is the service the scenario runs on through the
	// service protocol (docs/service-protocol.md) instead of the
	// reference: what certify writes for a failing case of a service.
	Service *Service
	// Mutant is a backend mutant (sim.MutantCreateNotMerge,
	// sim.MutantNoUniqueConstraint) or empty.
	Mutant string
	// Seed, when not zero, fixes the run's seed.
	Seed int64
	// LeaseTTL, when not zero, fixes the document lease TTL.
	LeaseTTL time.Duration
	// Documents maps a name to a document in the fake extractor's line
	// language (reference.ParseFakeDocument); ingest actions refer to them.
	Documents map[string]string
	// Initial, when set, is the state the stores hold before the first
	// step (the initial block; see initial.State).
	Initial *initial.State
	// Steps are the worker processes, run in order.
	Steps  []Step
	Expect Expect
}

// Service is a service of the user's, in any language, that a scenario
// runs on (as run --service-cmd would).
type Service struct {
	// Command is the service's command line, run in the current folder
	// (as --service-cmd's; run's --service-cmd replaces it, e.g. to replay
	// the scenario on another build of the service).
	Command string
	// Bugs are the service's broken variants switched on for the run
	// (passed in hello; the service refuses a name it does not know):
	// its own names, or the reference's defects for a service that has
	// them. A scenario with a service has its bugs here, not in Bugs.
	Bugs []reference.Bug
}

// Step is one worker process (catalogue.Step).
type Step struct {
	Worker  string
	Actions []Action
	Faults  []Fault
	// Background starts the worker and moves on once it first hits a
	// failpoint (or exits).
	Background bool
	// Resubmit names earlier workers whose unfinished actions this worker
	// resubmits first.
	Resubmit []string
	// ExpectHit lists the points that must fire in this worker. Nil means
	// the default: every point armed by Faults. A non-nil empty slice
	// (expectHit: [] in the file) expects nothing.
	ExpectHit       []faults.Point
	ContinueOnError bool
	// Kill, when set, SIGKILLs the worker Kill.Offset into its run (a
	// random-instant kill, replayed at the same offset).
	Kill *catalogue.RandomKill
	// Meanwhile, on a step that stalls (a pause fault), is what another
	// worker must do while it stalls for the run to count as exercised.
	Meanwhile *catalogue.Meanwhile
}

// Action is one thing a worker does (catalogue.Action). An ingest names its
// content through Document, a key of Scenario.Documents, instead of
// carrying the text inline.
type Action struct {
	// Do is ingest, retract, resume, recover, plansave-start,
	// plansave-invoke or plansave-conflict.
	Do string
	// Doc is the documentId in the stores (ingest, retract).
	Doc string
	// Document names the content of an ingest (a key of Documents).
	Document string
	// Op is an operationId (optional for ingest, required for resume).
	Op string
	// Rounds bounds a recover action; Parse fills in the default 10.
	Rounds   int
	Thread   string
	Owner    string
	Question string
	Minutes  int
	Approve  bool
}

// Fault arms one failpoint in a worker.
type Fault struct {
	Point faults.Point
	Kind  faults.Kind
	// Hit is the 1-based hit at which the fault fires (Parse fills in the
	// default 1); 0 means every hit.
	Hit int
	// Pause is how long a pause stalls (kind pause only, required there).
	Pause time.Duration
	// Server is the server a server fault targets (server-crash,
	// ack-lost, conn-reset; Parse fills in the default postgres).
	Server string
	// Tear is what a torn-write keeps or loses whole: 512 for disk
	// sectors, a smaller power of two down to 1 for a tear inside one
	// sector; 0 (or 4096 in the file) for 4 KiB pages.
	Tear int
	// A durable-step kill (point durableStep, kind crash or power-loss)
	// names the store call (Call, "ops.create": its Hit-th call that makes
	// a durable file operation) and the step: killed right after its
	// Step-th durable file operation. Of and Syscall are what the sweep
	// saw there (how many steps the call took, "fdatasync"), for its name.
	Call    string
	Step    int
	Of      int
	Syscall string
}

// Durable is the fault as the supervisor's durable-step kill (nil for
// any other point).
func (f Fault) Durable() *catalogue.DurableKill {
	if f.Point != catalogue.DurableStepPoint {
		return nil
	}
	k := &catalogue.DurableKill{Method: f.Call, Hit: f.Hit, Step: f.Step, Steps: f.Of, Op: f.Syscall, Power: f.Kind == faults.PowerLoss || f.Kind == faults.TornWrite, Server: f.Server}
	if f.Kind == faults.TornWrite {
		k.Tear = f.Action().TearUnit()
	}
	return k
}

// Action returns the fault as a faults.Action.
func (f Fault) Action() faults.Action {
	return faults.Action{Kind: f.Kind, Hit: f.Hit, PauseFor: f.Pause, Server: f.Server, Tear: f.Tear}
}

// The expected verdicts.
const (
	ExpectPass = "pass"
	ExpectFail = "fail"
)

// Expect is the outcome a scenario expects.
type Expect struct {
	// Verdict is ExpectPass or ExpectFail.
	Verdict string
	// Holds must not be violated; Breaks must be violated. Invariants in
	// neither are not judged (a mutant may break more than the one it pins).
	Holds  []check.Invariant
	Breaks []check.Invariant
}

// QuiesceWorker is the name of the last step of every scenario: the
// checker reads its recover result to judge liveness (I5).
const QuiesceWorker = "quiesce"

// ExpectedHits resolves the step's ExpectHit default.
func (st Step) ExpectedHits() []faults.Point {
	if st.ExpectHit != nil {
		return st.ExpectHit
	}
	var out []faults.Point
	for _, f := range st.Faults {
		// A durable-step kill is the supervisor's: the worker never
		// reports it; it must fire all the same (catalogue.Step.Durable).
		if f.Durable() == nil {
			out = append(out, f.Point)
		}
	}
	return out
}

// Case converts the scenario to the simulator's case. The case's Class is
// the scenario name, so reports list it as a row beside the windows.
func (s *Scenario) Case() catalogue.Case {
	c := catalogue.Case{ID: s.Name, System: s.system(), Class: s.Name, Description: s.Description, Initial: s.Initial}
	for _, st := range s.Steps {
		out := catalogue.Step{Worker: st.Worker, Background: st.Background, ContinueOnError: st.ContinueOnError}
		for _, a := range st.Actions {
			out.Actions = append(out.Actions, catalogue.Action{Do: a.Do, Doc: a.Doc, Content: s.Documents[a.Document], Op: a.Op,
				Rounds: a.Rounds, Thread: a.Thread, Owner: a.Owner, Question: a.Question, Minutes: a.Minutes, Approve: a.Approve})
		}
		for _, f := range st.Faults {
			if k := f.Durable(); k != nil {
				out.Durable = k
				continue
			}
			if out.Arms == nil {
				out.Arms = faults.Arms{}
			}
			out.Arms[f.Point] = f.Action()
		}
		out.Resubmit = slices.Clone(st.Resubmit)
		if st.Kill != nil {
			k := *st.Kill
			out.Kill = &k
		}
		if st.Meanwhile != nil {
			m := *st.Meanwhile
			out.Meanwhile = &m
		}
		if hits := st.ExpectedHits(); len(hits) > 0 {
			out.ExpectHit = slices.Clone(hits)
		}
		c.Steps = append(c.Steps, out)
	}
	return c
}

func (s *Scenario) system() faults.System {
	if s.System == "" {
		return faults.Ingestion
	}
	return s.System
}

// Apply returns cfg with the scenario's run settings (bugs, mutant, seed,
// lease TTL, service) put in. The backend is not changed: see Backend and
// CheckBackend. A service cfg already names (run --service-cmd) replaces
// the scenario's command; the scenario's service bugs are kept.
func (s *Scenario) Apply(cfg sim.Config) sim.Config {
	if len(s.Bugs) > 0 {
		cfg.Bugs = slices.Clone(s.Bugs)
	}
	if s.Service != nil {
		cfg.Bugs = slices.Clone(s.Service.Bugs)
		if cfg.Service == nil {
			cfg.Service = &sim.ServiceSpec{Command: s.Service.Command}
		}
	}
	if s.Mutant != "" {
		cfg.Mutant = s.Mutant
	}
	if s.Seed != 0 {
		cfg.Seed = s.Seed
	}
	if s.LeaseTTL > 0 {
		cfg.LeaseTTL = s.LeaseTTL
	}
	return cfg
}

// CheckBackend reports an error when the scenario requires another backend
// than the one the runner has.
func (s *Scenario) CheckBackend(name string) error {
	if s.Backend != "" && s.Backend != name {
		return fmt.Errorf("scenario %s requires backend %s, runner has %s", s.Name, s.Backend, name)
	}
	return nil
}

// Judge says whether a run's outcome matches the expectation: violated
// are the invariants the run broke ("I3" or full names, as
// verdict.CaseResult.Broken returns them) and ran is the run's verdict
// (verdict.Verdict: "pass", "FAIL", "not exercised", "undecided"). A run that
// was not exercised or undecided never matches. The error lists every
// difference.
func (s *Scenario) Judge(violated []string, ran string) error {
	broken := map[check.Invariant]bool{}
	var problems []string
	for _, v := range violated {
		inv, err := check.ParseInvariant(v)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		broken[inv] = true
	}
	want := verdict.Pass
	if s.Expect.Verdict == ExpectFail {
		want = verdict.Fail
	}
	if !strings.EqualFold(ran, string(want)) {
		problems = append(problems, fmt.Sprintf("verdict %q, want %q", ran, want))
	}
	var brokeHeld, heldBroken []string
	for _, inv := range s.Expect.Holds {
		if broken[inv] {
			brokeHeld = append(brokeHeld, inv.Short())
		}
	}
	for _, inv := range s.Expect.Breaks {
		if !broken[inv] {
			heldBroken = append(heldBroken, inv.Short())
		}
	}
	if len(brokeHeld) > 0 {
		problems = append(problems, fmt.Sprintf("broke %s, expected to hold", strings.Join(brokeHeld, ", ")))
	}
	if len(heldBroken) > 0 {
		problems = append(problems, fmt.Sprintf("did not break %s, expected to break", strings.Join(heldBroken, ", ")))
	}
	if len(problems) == 0 {
		return nil
	}
	got := make([]string, 0, len(broken))
	for _, inv := range check.All {
		if broken[inv] {
			got = append(got, inv.Short())
		}
	}
	return fmt.Errorf("scenario %s: outcome differs from expectation: %s (run broke [%s], verdict %s)",
		s.Name, strings.Join(problems, "; "), strings.Join(got, " "), ran)
}

// JudgeResult is Judge for a verdict.CaseResult.
func (s *Scenario) JudgeResult(r verdict.CaseResult) error {
	if r.Verdict == verdict.NotExercised {
		// No invariant was judged: say why instead of an empty list.
		return fmt.Errorf("scenario %s: not exercised: %s", s.Name, r.WhyNotExercised())
	}
	return s.Judge(r.Broken(), string(r.Verdict))
}
