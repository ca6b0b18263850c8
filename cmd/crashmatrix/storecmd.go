package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/spf13/cobra"

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

// checkConformance runs the conformance suites over the protocol before
// the crash matrix: properties.StoresFailures against the --store-cmd
// store and, with --plansave-cmd, properties.PlanSaveFailures against
// System B's: exit 1 if they fail, 2 if a store broke the protocol.
func (s *storeCmdFlags) checkConformance(cmd *cobra.Command, details bool) error {
	if s.conformanceRun != "" && (s.command == "" || !s.conformance) {
		return fmt.Errorf("--conformance-run %q runs the conformance suites of --store-cmd's store: give --store-cmd (and not --conformance=false)", s.conformanceRun)
	}
	if s.command == "" || !s.conformance {
		return nil
	}
	if s.conformanceRun != "" {
		if err := s.checkRunPattern(); err != nil {
			return err
		}
		// The suites read it (properties.StoresFailures).
		if err := os.Setenv("CRASHMATRIX_CONFORMANCE_RUN", s.conformanceRun); err != nil {
			return err
		}
		defer os.Unsetenv("CRASHMATRIX_CONFORMANCE_RUN")
	}
	pattern := s.conformanceRun != ""
	out := cmd.OutOrStdout()
	t0 := time.Now()
	var opened atomic.Int64
	var broken atomic.Pointer[storeproc.ProtocolError]
	// The store runs as in the matrix (docs/store-protocol.md, section 7):
	// each bundle a fresh folder and a namespace of its own, unique to this
	// run (a store on a server scopes its keys by it), every process one
	// TMPDIR for the whole run.
	space := sim.RunNamespace()
	tmp, err := os.MkdirTemp("", "crashmatrix-conformance-tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// A store that declares reopen serves bundle after bundle from a few
	// processes (a JVM or an interpreter starts a handful of times, not
	// once per bundle): each bundle's client greets a process its
	// predecessor closed with the bundle's own hello (its fresh folder and
	// namespace), which the store serves as a process started afresh
	// (docs/store-protocol.md, section 3). Only the crash matrix kills
	// store processes. A store that does not declare reopen gets a new
	// process per bundle, as before.
	pool := storeproc.NewPool()
	// Before tmp goes: the idle processes run in it.
	defer pool.Close()
	var starts storeproc.Starts
	start := func(command, test, dir string, require []string) (*storeproc.Client, error) {
		if pe := broken.Load(); pe != nil {
			// Nothing more to learn from a store that broke the protocol.
			return nil, fmt.Errorf("not started: the store broke the protocol before (request %s)", pe.Request)
		}
		n := opened.Add(1)
		procs := 1
		if strings.Contains(test, "/Concurrency/") {
			procs = 2 // concurrent clients race two processes on one store
		}
		return storeproc.Start(cmd.Context(), storeproc.Options{Command: command, Dir: dir, TempDir: tmp, Namespace: fmt.Sprintf("%s-conformance-%d", space, n),
			Timeout: s.timeout, HelloTimeout: s.timeout, Procs: procs, Require: require, Pool: pool, OnStart: starts.Add,
			OnProtocolError: func(_ context.Context, err *storeproc.ProtocolError) { broken.CompareAndSwap(nil, err) }})
	}
	failed := map[string]string{}
	// An upgrade run (--recover-store-cmd) recovers with version B: its
	// stores must pass the suites too; its failures are under
	// "versionB/".
	builds := map[string]string{"": s.command}
	if s.recover != "" {
		builds[versionB] = s.recover
	}
	for prefix, command := range builds {
		for path, msg := range properties.StoresFailures(func(test, dir string) (reference.Stores, error) {
			c, err := start(command, test, dir, []string{storeproc.StoreOperations, storeproc.StoreStates, storeproc.StoreRegistry, storeproc.StoreGraph, storeproc.StoreLocks})
			if err != nil {
				return reference.Stores{}, err
			}
			return c.Stores(), nil
		}) {
			failed[prefix+"Stores/"+path] = msg
		}
	}
	if s.planSave != "" {
		// System B's stores: the checkpoint and plan contracts the crash
		// matrix takes for granted (a plan table without its key).
		for path, msg := range properties.PlanSaveFailures(func(test, dir string) (sim.PlanSaveStores, error) {
			c, err := start(s.planSave, test, dir, []string{storeproc.StoreCheckpoints, storeproc.StorePlans})
			if err != nil {
				return sim.PlanSaveStores{}, err
			}
			return sim.PlanSaveStores{Checkpoints: c.Checkpoints(), Plans: c.Plans(), Closer: c}, nil
		}) {
			failed["PlanSave/"+path] = msg
		}
	}
	for path, msg := range failed {
		if pattern && strings.HasSuffix(path, "/") && strings.Contains(msg, "matches no subtest of") {
			return fmt.Errorf("--conformance-run %q matches no conformance subtest of %s (a failure's replay line gives the whole pattern)", s.conformanceRun, strings.TrimSuffix(strings.TrimPrefix(path, versionB), "/"))
		}
	}
	// The deepest failed subtests: the map holds each one's parents too.
	var failures []string
	for path, msg := range failed {
		leaf := true
		for other := range failed {
			if strings.HasPrefix(other, path+"/") {
				leaf = false
				break
			}
		}
		if leaf {
			line := "conformance/" + path + ": " + s.replayLine(msg)
			if !strings.Contains(line, "--conformance-run") {
				line += "\nrerun alone: " + s.conformanceCommand(anchored(strings.TrimPrefix(path, versionB)))
			}
			failures = append(failures, line)
		}
	}
	sort.Strings(failures)
	took := time.Since(t0).Round(time.Millisecond)
	_ = pool.Close()
	if pe := broken.Load(); pe != nil && pe.NoStart {
		fmt.Fprintf(out, "UNDECIDED: the store did not start: no hello reply within the start timeout (a store that needs longer to start needs a larger --store-timeout; one that never answers hello is broken):\n%v\n", pe)
		return exitError{2}
	}
	if pe := broken.Load(); pe != nil {
		fmt.Fprintf(out, "UNDECIDED: the store broke the store protocol during the conformance suites (%s):\n%v\n", took, pe)
		return exitError{2}
	}
	if len(failures) > 0 {
		fmt.Fprintf(out, "NOT CERTIFIED: the store fails %d conformance check(s) over the store protocol (%s):\n", len(failures), took)
		for _, f := range failures {
			if !details {
				f = clip(f)
			}
			fmt.Fprintln(out, "  "+strings.ReplaceAll(f, "\n", "\n    "))
		}
		if !pattern {
			fmt.Fprintln(out, "(--conformance=false runs the crash matrix without them)")
		}
		return exitError{1}
	}
	if pattern {
		fmt.Fprintf(out, "conformance: the stores pass the conformance subtests --conformance-run %s matches%s (%d store bundles, %s; %s); no crash matrix was run\n", shellQuote(s.conformanceRun), s.bothBuilds(), opened.Load(), took, &starts)
		return exitError{0}
	}
	fmt.Fprintf(out, "conformance: the stores pass every conformance suite over the store protocol%s (%d store bundles, %s; %s)\n", s.bothBuilds(), opened.Load(), took, &starts)
	return nil
}

// versionB prefixes the conformance failures of --recover-store-cmd's
// store.
const versionB = "versionB/"

// bothBuilds says, in an upgrade run, that the suites ran on both builds.
func (s *storeCmdFlags) bothBuilds() string {
	if s.recover == "" {
		return ""
	}
	return ", on version A (--store-cmd) and version B (--recover-store-cmd)"
}

// checkRunPattern refuses a --conformance-run pattern that does not
// compile, or whose first element names no suite this run has (Stores,
// and PlanSave with --plansave-cmd).
func (s *storeCmdFlags) checkRunPattern() error {
	p := strings.TrimPrefix(s.conformanceRun, "^$/")
	first, _, _ := strings.Cut(p, "/")
	for i, part := range strings.Split(p, "/") {
		if _, err := regexp.Compile(part); err != nil {
			return fmt.Errorf("--conformance-run %q, element %d: %w", s.conformanceRun, i+1, err)
		}
	}
	suites := []string{"Stores"}
	if s.planSave != "" {
		suites = append(suites, "PlanSave")
	}
	re := regexp.MustCompile(first)
	if !slices.ContainsFunc(suites, re.MatchString) {
		return fmt.Errorf("--conformance-run %q: its first element names the suite, one of %v here (a failure's replay line gives the whole pattern)", s.conformanceRun, suites)
	}
	return nil
}

// maxFailureLines is how much of one conformance failure certify prints
// without -v: a linearizability failure quotes its whole history.
const maxFailureLines = 24

// clip cuts a failure's message to maxFailureLines, keeping its last line
// (the rerun command) and saying how much was left out.
func clip(f string) string {
	lines := strings.Split(f, "\n")
	if len(lines) <= maxFailureLines {
		return f
	}
	keep := append(lines[:maxFailureLines-2:maxFailureLines-2], fmt.Sprintf("… %d more lines (-v prints them)", len(lines)-maxFailureLines+1), lines[len(lines)-1])
	return strings.Join(keep, "\n")
}

// goTestRun is the go test command a conformance failure's replay line
// names (properties: "replay: CRASHMATRIX_CONFORMANCE_SEED=N go test -run
// 'P'"), which a store run by --store-cmd has no Go test for.
var goTestRun = regexp.MustCompile(`go test -run '([^']*)'`)

// replayLine rewrites a conformance failure's go test replay command as
// the crashmatrix command that runs the same subtest on the same store.
func (s *storeCmdFlags) replayLine(msg string) string {
	return goTestRun.ReplaceAllStringFunc(msg, func(m string) string {
		return s.conformanceCommand(strings.TrimPrefix(goTestRun.FindStringSubmatch(m)[1], "^$/"))
	})
}

// conformanceCommand runs the conformance subtests pattern matches on the
// same stores, and nothing else.
func (s *storeCmdFlags) conformanceCommand(pattern string) string {
	return "crashmatrix certify " + strings.Join(s.replayArgs(), " ") + " --conformance-run " + shellQuote(pattern)
}

// anchored is the run pattern that matches the subtest at path
// ("PlanSave/PlanStore/Save…") and no other: each element quoted and
// anchored.
func anchored(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}
