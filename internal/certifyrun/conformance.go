package certifyrun

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/internal/cmdkit"
	"github.com/crashmatrix/crashmatrix/properties"
	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
)

// Conformance are the store protocol's conformance suites certify runs
// before the crash matrix, on a store run by a command (--store-cmd).
type Conformance struct {
	// Store and PlanSave are the commands of System A's and System B's
	// stores ("": no suite of that system).
	Store, PlanSave string
	// On runs them (--conformance); Pattern runs only the subtests it
	// matches (--conformance-run), then ends the run.
	On      bool
	Pattern string
	// Timeout bounds a store process's start and each message of a call.
	Timeout time.Duration
	// ReplayArgs are the flags that name the same stores again, for the
	// command that reruns one failed subtest.
	ReplayArgs []string
	// Recover is version B's store command in an upgrade run
	// (--recover-store-cmd): its stores must pass System A's suites
	// too; its failures are under "versionB/".
	Recover string
}

// RunConformance runs the conformance suites over the protocol before
// the crash matrix: properties.StoresFailures against the --store-cmd
// store and, with --plansave-cmd, properties.PlanSaveFailures against
// System B's. done says the run ends here, with code: 1 if they fail, 2
// if a store broke the protocol, 0 after a --conformance-run pattern's
// subtests passed; !done lets the matrix run.
func RunConformance(ctx context.Context, s Conformance, details bool, out io.Writer) (code int, done bool, err error) {
	if s.Pattern != "" && (s.Store == "" || !s.On) {
		return 0, false, fmt.Errorf("--conformance-run %q runs the conformance suites of --store-cmd's store: give --store-cmd (and not --conformance=false)", s.Pattern)
	}
	if s.Store == "" || !s.On {
		return 0, false, nil
	}
	if s.Pattern != "" {
		if err := s.checkRunPattern(); err != nil {
			return 0, false, err
		}
		// The suites read it (properties.StoresFailures).
		if err := os.Setenv("CRASHMATRIX_CONFORMANCE_RUN", s.Pattern); err != nil {
			return 0, false, err
		}
		defer os.Unsetenv("CRASHMATRIX_CONFORMANCE_RUN")
	}
	res, err := s.suites(ctx)
	if err != nil {
		return 0, false, err
	}
	failures, err := s.failures(res.failed)
	if err != nil {
		return 0, false, err
	}
	if code := s.verdict(out, res, failures, details); code >= 0 {
		return code, true, nil
	}
	return 0, false, nil
}

// suitesRun is what the conformance suites found.
type suitesRun struct {
	failed map[string]string // failed subtest path -> message, parents included
	opened int64             // store bundles started
	starts *storeproc.Starts
	broken *storeproc.ProtocolError // the first protocol error
	took   time.Duration
}

// suites runs the suites over the protocol, each bundle a store started
// for it.
func (s Conformance) suites(ctx context.Context) (suitesRun, error) {
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
		return suitesRun{}, err
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
	starts := &storeproc.Starts{}
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
		return storeproc.Start(ctx, storeproc.Options{Command: command, Dir: dir, TempDir: tmp, Namespace: fmt.Sprintf("%s-conformance-%d", space, n),
			Timeout: s.Timeout, HelloTimeout: s.Timeout, Procs: procs, Require: require, Pool: pool, OnStart: starts.Add,
			OnProtocolError: func(_ context.Context, err *storeproc.ProtocolError) { broken.CompareAndSwap(nil, err) }})
	}
	failed := s.run(start)
	res := suitesRun{failed: failed, starts: starts, took: time.Since(t0).Round(time.Millisecond)}
	_ = pool.Close()
	res.opened, res.broken = opened.Load(), broken.Load()
	return res, nil
}

// run runs System A's suites and, with a System B store, System B's,
// each bundle's stores started by start.
func (s Conformance) run(start func(command, test, dir string, require []string) (*storeproc.Client, error)) map[string]string {
	failed := map[string]string{}
	builds := map[string]string{"": s.Store}
	if s.Recover != "" {
		builds[versionB] = s.Recover
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
	if s.PlanSave != "" {
		// System B's stores: the checkpoint and plan contracts the crash
		// matrix takes for granted (a plan table without its key).
		for path, msg := range properties.PlanSaveFailures(func(test, dir string) (sim.PlanSaveStores, error) {
			c, err := start(s.PlanSave, test, dir, []string{storeproc.StoreCheckpoints, storeproc.StorePlans})
			if err != nil {
				return sim.PlanSaveStores{}, err
			}
			return sim.PlanSaveStores{Checkpoints: c.Checkpoints(), Plans: c.Plans(), Closer: c}, nil
		}) {
			failed["PlanSave/"+path] = msg
		}
	}
	return failed
}

// failures are the deepest failed subtests (failed holds each one's
// parents too), each with the command that reruns it; a pattern that
// matched no subtest is an error.
func (s Conformance) failures(failed map[string]string) ([]string, error) {
	for path, msg := range failed {
		if s.Pattern != "" && strings.HasSuffix(path, "/") && strings.Contains(msg, "matches no subtest of") {
			return nil, fmt.Errorf("--conformance-run %q matches no conformance subtest of %s (a failure's replay line gives the whole pattern)", s.Pattern, strings.TrimSuffix(strings.TrimPrefix(path, versionB), "/"))
		}
	}
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
	return failures, nil
}

// verdict prints the suites' verdict and returns the exit code that ends
// the run: 2 if the store broke the protocol, 1 if it failed a check, 0
// if it passed a --conformance-run pattern's subtests; -1 if it passed
// every suite and the matrix runs.
func (s Conformance) verdict(out io.Writer, res suitesRun, failures []string, details bool) int {
	if pe := res.broken; pe != nil && pe.NoStart {
		fmt.Fprintf(out, "UNDECIDED: the store did not start: no hello reply within the start timeout (a store that needs longer to start needs a larger --store-timeout; one that never answers hello is broken):\n%v\n", pe)
		return 2
	}
	if pe := res.broken; pe != nil {
		fmt.Fprintf(out, "UNDECIDED: the store broke the store protocol during the conformance suites (%s):\n%v\n", res.took, pe)
		return 2
	}
	if len(failures) > 0 {
		fmt.Fprintf(out, "NOT CERTIFIED: the store fails %d conformance check(s) over the store protocol (%s):\n", len(failures), res.took)
		for _, f := range failures {
			if !details {
				f = clip(f)
			}
			fmt.Fprintln(out, "  "+strings.ReplaceAll(f, "\n", "\n    "))
		}
		if s.Pattern == "" {
			fmt.Fprintln(out, "(--conformance=false runs the crash matrix without them)")
		}
		return 1
	}
	if s.Pattern != "" {
		fmt.Fprintf(out, "conformance: the stores pass the conformance subtests --conformance-run %s matches%s (%d store bundles, %s; %s); no crash matrix was run\n", cmdkit.ShellQuote(s.Pattern), s.bothBuilds(), res.opened, res.took, res.starts)
		return 0
	}
	fmt.Fprintf(out, "conformance: the stores pass every conformance suite over the store protocol%s (%d store bundles, %s; %s)\n", s.bothBuilds(), res.opened, res.took, res.starts)
	return -1
}

// versionB prefixes the conformance failures of --recover-store-cmd's
// store.
const versionB = "versionB/"

// bothBuilds says, in an upgrade run, that the suites ran on both builds.
func (s Conformance) bothBuilds() string {
	if s.Recover == "" {
		return ""
	}
	return ", on version A (--store-cmd) and version B (--recover-store-cmd)"
}

// checkRunPattern refuses a --conformance-run pattern that does not
// compile, or whose first element names no suite this run has (Stores,
// and PlanSave with --plansave-cmd).
func (s Conformance) checkRunPattern() error {
	p := strings.TrimPrefix(s.Pattern, "^$/")
	first, _, _ := strings.Cut(p, "/")
	for i, part := range strings.Split(p, "/") {
		if _, err := regexp.Compile(part); err != nil {
			return fmt.Errorf("--conformance-run %q, element %d: %w", s.Pattern, i+1, err)
		}
	}
	suites := []string{"Stores"}
	if s.PlanSave != "" {
		suites = append(suites, "PlanSave")
	}
	re := regexp.MustCompile(first)
	if !slices.ContainsFunc(suites, re.MatchString) {
		return fmt.Errorf("--conformance-run %q: its first element names the suite, one of %v here (a failure's replay line gives the whole pattern)", s.Pattern, suites)
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
func (s Conformance) replayLine(msg string) string {
	return goTestRun.ReplaceAllStringFunc(msg, func(m string) string {
		return s.conformanceCommand(strings.TrimPrefix(goTestRun.FindStringSubmatch(m)[1], "^$/"))
	})
}

// conformanceCommand runs the conformance subtests pattern matches on the
// same stores, and nothing else.
func (s Conformance) conformanceCommand(pattern string) string {
	return "crashmatrix certify " + strings.Join(s.ReplayArgs, " ") + " --conformance-run " + cmdkit.ShellQuote(pattern)
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
