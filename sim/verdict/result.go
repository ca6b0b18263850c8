package verdict

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/history"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Verdict is a case's outcome.
type Verdict string

// The verdicts. Only Pass certifies.
const (
	Pass         Verdict = "pass"
	Fail         Verdict = "FAIL"
	NotExercised Verdict = "not exercised"
	Undecided    Verdict = "undecided"
	// NotApplicable: the case tests a system the backend does not
	// provide (System B when Backend.OpenPlanSave is nil). It is listed,
	// neither passed nor failed.
	NotApplicable Verdict = "not applicable"
)

// WorkerResult is what became of one worker process.
type WorkerResult struct {
	Worker string        `json:"worker"`
	PID    int           `json:"pid"`
	Exit   string        `json:"exit"` // "ok", "killed at <point>", "timeout", "error: ..."
	Hits   []string      `json:"hits,omitempty"`
	Took   time.Duration `json:"took"`
	// Output is the worker's output file, kept when it hung: its
	// goroutines' stacks at the deadline are there. Stuck names where it
	// hung, read from them.
	Output string   `json:"output,omitempty"`
	Stuck  []string `json:"stuck,omitempty"`
	// StoreStarts is how long each open of the worker's stores took
	// (store-cmd: its store process's start, until the hello reply), left
	// out of its deadline (Backend.StartTimeout).
	StoreStarts []time.Duration `json:"storeStarts,omitempty"`
	// StartRetries counts the worker's service starts that got no hello
	// within the start timeout and were tried once more (and answered).
	StartRetries int `json:"startRetries,omitempty"`
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Case       catalogue.Case    `json:"case"`
	Verdict    Verdict           `json:"verdict"`
	Hits       map[string]int    `json:"hits"`
	Violations []check.Violation `json:"violations,omitempty"`
	Notes      []string          `json:"notes,omitempty"`
	// PowerLost is where the case's power losses threw data or names
	// away, each as lazyfs.LostFile says it ("checkpoints.db-journal:
	// removed, its directory not synced, so it is back"), names first.
	PowerLost []string `json:"powerLost,omitempty"`
	// DurableCalls are the store calls of a worker whose durable steps
	// the case watched (Step.Durable) and what the lazy mount saw each
	// make.
	DurableCalls []catalogue.DurableCall `json:"durableCalls,omitempty"`
	Workers      []WorkerResult          `json:"workers"`
	Completed    int                     `json:"completed"`
	Took         time.Duration           `json:"took"`
	Dir          string                  `json:"dir"`
	// LeaseTTL is the lease TTL the case ran with (its last attempt's).
	LeaseTTL time.Duration `json:"leaseTtl,omitempty"`
	// NotExercised says why, when the verdict is NotExercised.
	NotExercised *NotExercisedReason `json:"notExercised,omitempty"`
	// Attempts are the earlier runs of a case retried because it was not
	// exercised, oldest first.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Space is the space the run wrote in (its operationIds are scoped by
	// OpID to it).
	Space string `json:"space,omitempty"`
	// Timeline is the case's history, for reports.
	Timeline []history.Record `json:"timeline,omitempty"`
	// UpgradedAt, in a run recovered by another build
	// (sim.Config.RecoverWith), names the case's first worker that ran on
	// version B: it and every later one, and the snapshots, did
	// (sim/upgrade.go); "" when no worker of the case died, so that it ran
	// on version A alone.
	UpgradedAt string `json:"upgradedAt,omitempty"`
	// Expect is set when the case is a scenario judged against its
	// expect block (crashmatrix run): a scenario that expects a mutant to
	// break invariants and sees them break has verdict FAIL and meets its
	// expectation; the report's verdict follows the expectation.
	Expect *Expectation `json:"expect,omitempty"`
}

// Expectation is how a scenario's outcome compares with what it expects.
type Expectation struct {
	Met bool `json:"met"`
	// Note says what happened: "broke I3,I4 as expected", or what was not
	// met.
	Note string `json:"note"`
}

// CaseLogs is the folder of a case (CaseEnv.Logs) that holds what the
// harness writes about its stores: beside the case's data, never in it.
const CaseLogs = "logs"

// StoreLogs is the folder that holds the logs of the case's store
// processes (store-cmd: store-<pid>.log, each one's whole stderr), or ""
// when the case left none.
func (cr CaseResult) StoreLogs() string {
	if cr.Dir == "" {
		return ""
	}
	dir := filepath.Join(cr.Dir, CaseLogs)
	if ents, err := os.ReadDir(dir); err != nil || len(ents) == 0 {
		return ""
	}
	return dir
}

// Broken returns the short names of the invariants the case broke.
func (cr CaseResult) Broken() []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range cr.Violations {
		if s := v.Invariant.Short(); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// WhyNotExercised says why a case was not exercised, from its own notes
// (not those of earlier attempts), and what that can mean; never empty.
func (cr CaseResult) WhyNotExercised() string {
	var why []string
	for _, n := range cr.Notes {
		if !strings.HasPrefix(n, EarlierAttempts) {
			why = append(why, n)
		}
	}
	if len(why) == 0 {
		why = []string{"the fault did not fire"}
	}
	x := cr.NotExercised
	if x == nil || (x.Cause == CauseUnreachable && x.Detail == "") {
		return strings.Join(why, "; ") + ", which can mean the code path changed"
	}
	s := strings.Join(why, "; ") + " (" + string(x.Cause)
	if x.Detail != "" {
		s += ": " + x.Detail
	}
	s += ")"
	if x.Advice != "" {
		s += "; what to do: " + x.Advice
	}
	return s
}
