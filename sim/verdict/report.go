package verdict

import (
	"sort"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// Report is the outcome of a whole run.
type Report struct {
	Backend  string          `json:"backend"`
	Mutant   string          `json:"mutant,omitempty"`
	Bugs     []string        `json:"bugs,omitempty"`
	Seed     int64           `json:"seed"`
	Started  time.Time       `json:"started"`
	Took     time.Duration   `json:"took"`
	Results  []CaseResult    `json:"results"`
	Counts   map[Verdict]int `json:"counts"`
	Verdict  Verdict         `json:"verdict"`
	ExitCode int             `json:"exitCode"`
	// Timing is what the run used: the lease TTL and what follows from
	// it, the calibration and every rise while it ran.
	Timing catalogue.Timing `json:"timing"`
	// StoreWindows are the windows the store declared, as the probe run
	// found them; Probed says a probe ran to its end (so an empty list
	// means none).
	StoreWindows []catalogue.StoreWindow `json:"storeWindows,omitempty"`
	Probed       bool                    `json:"probed,omitempty"`
	// DurableCalls are the probe's store calls that made a durable file
	// operation on the lazy mount, DurableMulti those that made two or
	// more (sim/casefaults/durable.go); both 0 where no durable probe ran.
	DurableCalls int `json:"durableCalls,omitempty"`
	DurableMulti int `json:"durableMulti,omitempty"`
	// ServerDurable counts, for each database server whose durable steps
	// the probe watched (--backend containers), the store calls during
	// which it made one.
	ServerDurable map[string]int `json:"serverDurable,omitempty"`
	// Matrix is the whole matrix a certify run belongs to; Shard, when
	// set, the part of it the run covered (certify --shard); Merged the
	// shard reports a merge combined into this one (shard.go).
	Matrix *catalogue.MatrixID `json:"matrix,omitempty"`
	Shard  *catalogue.ShardRun `json:"shard,omitempty"`
	Merged []MergedShard       `json:"merged,omitempty"`
	// Subset names the filter of a run that was not the whole matrix
	// (e.g. "--point beforeCompleted --kind crash"); "" for the whole.
	Subset string `json:"subset,omitempty"`
	// PowerLoss, when the run left the power-loss column out, says so
	// and why ("power loss: not tested (...)"); reports print it.
	PowerLoss string `json:"powerLoss,omitempty"`
	// Exploration says what the seeded exploration after the matrix ran
	// and found ("exploration: 3000 schedules of seed 1 (in-process), no
	// invariant broken"; "exploration: off"); a finding is among Results
	// as a failing case. Reports print it.
	Exploration string `json:"exploration,omitempty"`
	// StoreStarts says how long the workers' stores took to start
	// ("store starts: median …, max … over N worker store opens"), when
	// the backend notes it (store-cmd).
	StoreStarts string `json:"storeStarts,omitempty"`
	// NotJudged lists what the invariants could not judge of a service
	// run through the service protocol (sim.ServiceSpec.NotJudged), and
	// LeftOut the cases it could not run: never counted as held.
	NotJudged []string `json:"notJudged,omitempty"`
	LeftOut   []string `json:"leftOut,omitempty"`
	// Upgrade, in a run recovered by another build of the store
	// (sim.Config.RecoverWith), says which (sim.Runner.UpgradeLine);
	// reports print it.
	Upgrade string `json:"upgrade,omitempty"`
}

// NotRunFailFast is the note of a case a fail-fast run never started.
const NotRunFailFast = "not run: the run stopped at its first failure (fail-fast)"

// EarlierAttempts starts the note of a case that was run again because
// it was not exercised; it lists each earlier attempt's own notes, flat.
const EarlierAttempts = "earlier attempts were not exercised: "

// Finish computes counts, the overall verdict and the exit code (0
// certified, 1 an invariant broke or a case was not exercised, 2
// undecided or nothing applicable ran) of a report, whether RunAll ran
// its cases or they were run one by one (the run command's scenarios).
// Not-applicable cases neither pass nor fail.
func (rep *Report) Finish() {
	rep.StoreStarts = storeStartsLine(rep.Results)
	rep.Counts = map[Verdict]int{}
	judged, unmet := false, 0
	for _, r := range rep.Results {
		rep.Counts[r.Verdict]++
		if r.Expect != nil {
			judged = true
			if !r.Expect.Met {
				unmet++
			}
		}
	}
	if judged {
		// Scenarios judged against their expectations (run): exit 0 when
		// every one met its own, as crashmatrix run exits.
		switch {
		case rep.Counts[Undecided] > 0:
			rep.Verdict, rep.ExitCode = Undecided, 2
		case unmet > 0:
			rep.Verdict, rep.ExitCode = Fail, 1
		default:
			rep.Verdict, rep.ExitCode = Pass, 0
		}
		return
	}
	switch {
	case rep.Counts[Fail] > 0 || rep.Counts[NotExercised] > 0:
		rep.Verdict, rep.ExitCode = Fail, 1
	case rep.Counts[Undecided] > 0 || len(rep.Results) == rep.Counts[NotApplicable]:
		rep.Verdict, rep.ExitCode = Undecided, 2
	default:
		rep.Verdict, rep.ExitCode = Pass, 0
	}
}

// Broken lists the invariants (short names) broken anywhere in the run.
func (rep Report) Broken() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rep.Results {
		for _, b := range r.Broken() {
			if !seen[b] {
				seen[b] = true
				out = append(out, b)
			}
		}
	}
	sort.Strings(out)
	return out
}
