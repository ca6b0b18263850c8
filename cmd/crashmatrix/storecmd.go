package main

import (
	"fmt"
	"os"
	"time"

	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/internal/certifyrun"

	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/storecmd"
	"github.com/spf13/pflag"
)

// storeCmdFlags name stores written in any language, run as child
// processes speaking the store protocol (docs/store-protocol.md).
type storeCmdFlags struct {
	command, planSave string
	// recover is version B of --store-cmd's store (--recover-store-cmd):
	// every crash is recovered by it (sim.Config.RecoverWith).
	recover        string
	timeout        time.Duration
	conformance    bool
	conformanceRun string
}

// register adds the flags; conformance only where a run certifies.
func (s *storeCmdFlags) register(fl *pflag.FlagSet, conformance bool) {
	fl.StringVar(&s.command, "store-cmd", "", "certify System A's stores run by this command, which speaks the store protocol on stdin/stdout (docs/store-protocol.md), e.g. \"python3 mystore.py\"")
	fl.StringVar(&s.recover, "recover-store-cmd", "", "an upgrade mid-flight: recover every crash with this command, another build of --store-cmd's store (version B), on the data --store-cmd's left; every worker after the crash and the checks' snapshots run it (docs/certify-other-language.md)")
	fl.StringVar(&s.planSave, "plansave-cmd", "", "certify System B's checkpoint and plan stores run by this command (store protocol), beside --store-cmd's System A")
	if conformance {
		fl.BoolVar(&s.conformance, "conformance", true, "with --store-cmd: run the stores' conformance suites over the protocol before the crash matrix (a store that fails them is not certified)")
		fl.StringVar(&s.conformanceRun, "conformance-run", "", "with --store-cmd: run only the conformance subtests this go test -run style pattern matches (e.g. 'Stores/Behaviour/Locks'; a failure's replay line gives it), then stop: no crash matrix")
	}
	fl.DurationVar(&s.timeout, "store-timeout", 0, "how long a store process may take to start (until it answers hello; default 60s) and for each message of a call (default 10s) before it is a protocol error")
}

// spec returns the store-cmd backend spec when a store command was given
// (an empty spec otherwise); checkFlags refused another --backend and a
// blank command before.
func (s *storeCmdFlags) spec(inProcess bool) (sim.BackendSpec, error) {
	if s.command == "" && s.planSave == "" {
		return sim.BackendSpec{}, nil
	}
	if s.command == "" {
		return sim.BackendSpec{}, fmt.Errorf("--plansave-cmd needs --store-cmd too (the run calibrates its timings on System A); for System B's windows only, add --point %s,%s,%s",
			faults.PlanSaveBeforeApprove, faults.PlanSaveBeforeBusiness, faults.PlanSaveBeforeCheckpoint)
	}
	if inProcess {
		return sim.BackendSpec{}, fmt.Errorf("--store-cmd needs real worker processes (a store process is a child of its worker and dies with it): drop --in-process (explore: add --processes)")
	}
	wd, err := os.Getwd()
	if err != nil {
		return sim.BackendSpec{}, err
	}
	return storecmd.Spec(s.command, s.planSave, wd, s.timeout), nil
}

// useRecovery makes cfg an upgrade run when --recover-store-cmd was given:
// version B runs in the same directory as --store-cmd, with its
// --plansave-cmd and --store-timeout.
func (s *storeCmdFlags) useRecovery(cfg *sim.Config) {
	if s.recover == "" || cfg.Backend.Name != storecmd.Name {
		return
	}
	b := storecmd.Spec(s.recover, s.planSave, cfg.Backend.Args[storecmd.ArgWorkDir], s.timeout)
	cfg.RecoverWith, cfg.RecoverLabel = &b, shellQuote(s.recover)
}

// replayArgs are the flags that name the same store commands again (nil
// without a store command): a replay runs in the same directory.
func (s *storeCmdFlags) replayArgs() []string {
	if s.command == "" && s.planSave == "" {
		return nil
	}
	var out []string
	if s.command != "" {
		out = append(out, "--store-cmd", shellQuote(s.command))
	}
	if s.planSave != "" {
		out = append(out, "--plansave-cmd", shellQuote(s.planSave))
	}
	if s.recover != "" {
		out = append(out, "--recover-store-cmd", shellQuote(s.recover))
	}
	if s.timeout > 0 {
		out = append(out, "--store-timeout", s.timeout.String())
	}
	return out
}

// conformanceOptions are the conformance suites certify runs before the
// crash matrix on --store-cmd's store (certifyrun.RunConformance).
func (s *storeCmdFlags) conformanceOptions() certifyrun.Conformance {
	return certifyrun.Conformance{Store: s.command, PlanSave: s.planSave, On: s.conformance, Pattern: s.conformanceRun,
		Timeout: s.timeout, ReplayArgs: s.replayArgs(), Recover: s.recover}
}
