package bench

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/crashmatrix/crashmatrix/internal/tune"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/embedded"
	"github.com/crashmatrix/crashmatrix/sim/explore"
)

// exploreMode is a way exploration runs whose rate bench measures.
type exploreMode struct {
	name                       string
	inProcess, files, simStore bool
	rounds                     int
	target                     float64 // schedules/s (issue #24), 0 for none
}

// exploration prints the exploration figures: schedules per second in
// each mode, and for each reference mutant the time to the first
// violation and to the shrunk scenario.
func (o *sitting) exploration() error {
	restore := tune.GC(true)
	defer restore()
	// The in-process rate is measured in rounds, each exploring further
	// along one seed, and reported as the median: a shared machine's speed
	// wanders by a third between seconds.
	for _, mode := range []exploreMode{
		{"in-process, SQLite memory database (the in-process default)", true, false, false, 5, 1500},
		{"in-process, SIMULATED durable store (explore --sim-store: protocol only, never certifies)", true, false, true, 5, 10000},
		{"in-process, SQLite file on " + map[bool]string{true: "tmpfs", false: "disk"}[root() == "/dev/shm"] + " (--in-process-files)", true, true, false, 3, 0},
		{"process kills, SQLite file", false, true, false, 1, 0},
	} {
		if err := o.exploreRate(mode); err != nil {
			return err
		}
	}
	return o.exploreMutants()
}

// exploreRunner is an exploration's runner on SQLite (or on the
// simulated store), on a fresh work directory.
func (o *sitting) exploreRunner(inProcess, files, simStore bool, bugs []reference.Bug, mutant string) (*sim.Runner, string, error) {
	base := ""
	if inProcess {
		base = root()
	}
	work, err := os.MkdirTemp(base, "crashmatrix-bench-explore-")
	if err != nil {
		return nil, "", err
	}
	cfg := sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, Launcher: sim.BinaryLauncher{Path: o.Self}, WorkDir: work,
		InProcess: inProcess, InProcessFiles: files, Seed: 1, Bugs: bugs, Mutant: mutant}
	if simStore {
		b := embedded.SimStore()
		cfg.Use, cfg.SimulatedStore = &b, true
	}
	r, err := sim.NewRunner(cfg)
	if err != nil {
		os.RemoveAll(work)
	}
	return r, work, err
}

// exploreRate measures and prints the exploration rate of the reference
// in one mode.
func (o *sitting) exploreRate(mode exploreMode) error {
	r, work, err := o.exploreRunner(mode.inProcess, mode.files, mode.simStore, nil, "")
	if err != nil {
		return err
	}
	var rates []float64
	var schedules int
	var took, cpu time.Duration
	for i := 0; i < mode.rounds; i++ {
		cpu0 := tune.CPUTime()
		res := explore.Run(o.ctx, r, explore.Options{Seed: 11, Skip: schedules, Budget: o.Explore / time.Duration(mode.rounds), Parallel: 4 * runtime.NumCPU()})
		cpu += tune.CPUTime() - cpu0
		if res.Finding != nil {
			r.CloseShared()
			os.RemoveAll(work)
			return fmt.Errorf("exploring the reference found %s (seed 11, schedule %d): the rate would be meaningless", res.Finding.Invariant, res.Finding.Index)
		}
		rates = append(rates, res.Rate())
		schedules += res.Schedules
		took += res.Took
	}
	r.CloseShared()
	os.RemoveAll(work)
	slices.Sort(rates)
	line := fmt.Sprintf("exploration, %s: %d schedules in %s", mode.name, schedules, took.Round(time.Millisecond))
	if len(rates) > 1 {
		line += fmt.Sprintf(", median %.0f schedules/s (min %.0f, max %.0f over %d rounds)", rates[len(rates)/2], rates[0], rates[len(rates)-1], len(rates))
	} else {
		line += fmt.Sprintf(" = %.0f schedules/s", rates[0])
	}
	if mode.inProcess && schedules > 0 {
		ms := float64(cpu.Microseconds()) / 1000 / float64(schedules)
		// What the CPU cost allows with every core busy: on a shared
		// machine the wall rate measures the neighbours too.
		line += fmt.Sprintf(", %.3f ms of CPU each (%.0f/s if all %d cores were ours)", ms, float64(runtime.NumCPU())*1000/ms, runtime.NumCPU())
	}
	line += " (reference, seed 11, no violation)"
	if mode.target > 0 {
		line += fmt.Sprintf(" (target >= %.0f schedules/s: %s)", mode.target, metOrNot(rates[len(rates)/2] >= mode.target))
	}
	fmt.Fprintln(o.Out, line)
	return nil
}

// exploreMutants prints, for each reference mutant, the time exploration
// takes to its first violation and to the shrunk scenario.
func (o *sitting) exploreMutants() error {
	for _, m := range []struct {
		name   string
		bugs   []reference.Bug
		mutant string
		want   string
	}{
		{string(reference.BugRecallModelOnResume), []reference.Bug{reference.BugRecallModelOnResume}, "", "I1"},
		{string(reference.BugSkipRevisionCheck), []reference.Bug{reference.BugSkipRevisionCheck}, "", "I2"},
		{string(reference.BugAdvanceBeforeGraphWrite), []reference.Bug{reference.BugAdvanceBeforeGraphWrite}, "", "I4"},
		{sim.MutantCreateNotMerge, nil, sim.MutantCreateNotMerge, "I3"},
		{sim.MutantNoUniqueConstraint, nil, sim.MutantNoUniqueConstraint, "I8"},
	} {
		r, work, err := o.exploreRunner(true, false, false, m.bugs, m.mutant)
		if err != nil {
			return err
		}
		res := explore.Run(o.ctx, r, explore.Options{Seed: 1, Budget: time.Minute, Parallel: 2, Target: m.want})
		r.CloseShared()
		os.RemoveAll(work)
		f := res.Finding
		if f == nil {
			return fmt.Errorf("mutant %s: no %s violation within a minute", m.name, m.want)
		}
		fmt.Fprintf(o.Out, "mutant %-28s %s after %3d schedules: first violation %6s, shrunk file %6s (%d actions and faults outside the final recovery; %s; reproduced %d/%d)\n",
			m.name, f.Invariant, res.Schedules, f.FoundAfter.Round(time.Millisecond), f.ShrunkAfter.Round(time.Millisecond), explore.Size(f.Shrunk), explore.Describe(f.Shrunk), f.Reproduced, f.Reruns)
	}
	return nil
}
