package main

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc/refservice"
	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim/verdict"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain makes the test binary the crashmatrix command of the scripts
// (testscript puts it on their PATH) and the worker it starts: certify
// runs "<its own executable> worker --spec FILE", which is this binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "worker" {
		main()
		os.Exit(0)
	}
	if len(os.Args) > 1 && (os.Args[1] == "service-go" || os.Args[1] == "service-go-own") {
		// The reference as a service of its own (examples/service-go,
		// with --own-stores for service-go-own), for the scripts'
		// --service-cmd 'crashmatrix service-go'.
		if err := (refservice.Options{OwnStores: os.Args[1] == "service-go-own"}).Serve(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "service-go:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testscript.Main(m, map[string]func(){"crashmatrix": main})
}

// TestScripts runs testdata/scripts/*.txtar: every command's exit codes,
// flags and error messages, the report files, an interrupted run.
func TestScripts(t *testing.T) { runScripts(t, scriptParams("testdata/scripts")) }

// runScripts is testscript.Run with the folder it makes for the scripts'
// work (go-test-script*) inside t.TempDir: testscript removes that folder
// when its last script ends, so with -run selecting none of its scripts
// it was left behind, empty, in TMPDIR.
func runScripts(t *testing.T, p testscript.Params) {
	t.Setenv("GOTMPDIR", t.TempDir())
	testscript.Run(t, p)
}

// TestScriptsAlone runs testdata/alone/*.txtar after TestScripts is over,
// one at a time: scripts that need no other crashmatrix run going on the
// machine. They SIGKILL a supervisor and assert that what it left (a lazy
// mount, containers) outlives it until the next run removes it; every run
// removes a dead run's leftovers when it starts (rightly), so a script
// running beside them, each other included, would race them. Go runs the
// top-level tests of a package one after the other and make test runs one
// package at a time (go test -p 1); testscript runs the scripts of one
// Run in parallel, so each gets a Run of its own inside a subtest, which
// returns only when its script is done.
func TestScriptsAlone(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "alone", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata/alone: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txtar"), func(t *testing.T) {
			p := scriptParams("")
			p.Files = []string{f}
			runScripts(t, p)
		})
	}
}

// scriptParams are the scripts' commands and conditions, for the scripts
// in dir.
// goCache is the go command's build cache.
var goCache = sync.OnceValue(func() string {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})

func scriptParams(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("CRASHMATRIX_ROOT", rootDir())
			// bench builds its spawn floor, an empty Go binary, with the go
			// command: it needs the build cache (the scripts' HOME is none).
			env.Setenv("GOCACHE", goCache())
			// What the containers backend needs (Makefile PODMAN_ENV).
			for _, kv := range os.Environ() {
				k, _, _ := strings.Cut(kv, "=")
				switch {
				case k == "DOCKER_HOST", k == "CONTAINERS_CONF", strings.HasPrefix(k, "TESTCONTAINERS_"),
					k == "CRASHMATRIX_POSTGRES_IMAGE", k == "CRASHMATRIX_NEO4J_IMAGE", k == "CRASHMATRIX_PODMAN_SOCKET", k == "CRASHMATRIX_LOOPBACK_ONLY":
					// Not a server DSN from the caller's environment: the
					// scripts say which server they use.
					env.Vars = append(env.Vars, kv)
				}
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "containers":
				return containersAvailable(), nil
			case "fuse":
				return lazyfs.Available() == nil, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits":        cmdExits,
			"report":       cmdReport,
			"waitfile":     cmdWaitFile,
			"noworkers":    cmdNoWorkers,
			"waitmount":    cmdWaitMount,
			"nomounts":     cmdNoMounts,
			"emptydir":     cmdEmptyDir,
			"closedport":   cmdClosedPort,
			"nocontainers": cmdNoContainers,
			"localpg":      cmdLocalPG,
		},
	}
}

// rootDir is the module root (the scripts read the scenario library).
func rootDir() string {
	wd, _ := os.Getwd()
	return filepath.Clean(filepath.Join(wd, "..", ".."))
}

// exits CODE PROGRAM ARGS... runs the program like exec and requires that
// exact exit code (0 certified, 1 invalid, 2 undecided or a usage error).
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: code %q: %v", args[0], err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// report KIND FILE key=value... parses a file certify wrote and checks it:
// KIND is json, junit or html; keys are cases (how many), pass, fail,
// notexercised, undecided (how many cases had that verdict), verdict and
// exit (the run's, json only).
func cmdReport(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: report json|junit|html FILE [key=value...]")
	}
	data := ts.ReadFile(args[1])
	want := map[string]string{}
	for _, kv := range args[2:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			ts.Fatalf("report: %q is not key=value", kv)
		}
		want[k] = v
	}
	got := map[string]string{}
	switch args[0] {
	case "json":
		var rep verdict.Report
		if err := json.Unmarshal([]byte(data), &rep); err != nil {
			ts.Fatalf("report %s: not a JSON report: %v", args[1], err)
		}
		counts := map[verdict.Verdict]int{}
		for _, r := range rep.Results {
			counts[r.Verdict]++
			if r.Case.ID == "" {
				ts.Fatalf("report %s: a result without a case id", args[1])
			}
			if r.Verdict == verdict.NotExercised && r.NotExercised == nil {
				ts.Fatalf("report %s: case %s not exercised without a reason", args[1], r.Case.ID)
			}
		}
		for v, n := range rep.Counts {
			if counts[v] != n {
				ts.Fatalf("report %s: counts say %d %s, the results %d", args[1], n, v, counts[v])
			}
		}
		if rep.Timing.LeaseTTL <= 0 || rep.Timing.Source == "" {
			ts.Fatalf("report %s: no timing (%+v)", args[1], rep.Timing)
		}
		got["cases"] = strconv.Itoa(len(rep.Results))
		got["pass"], got["fail"] = strconv.Itoa(counts[verdict.Pass]), strconv.Itoa(counts[verdict.Fail])
		got["notexercised"], got["undecided"] = strconv.Itoa(counts[verdict.NotExercised]), strconv.Itoa(counts[verdict.Undecided])
		kinds := map[string]int{}
		for _, r := range rep.Results {
			kinds["kind."+string(r.Case.Kind)]++
		}
		for k, n := range kinds {
			got[k] = strconv.Itoa(n)
		}
		got["verdict"], got["exit"] = string(rep.Verdict), strconv.Itoa(rep.ExitCode)
		got["timing"] = rep.Timing.Source
	case "junit":
		var doc struct {
			XMLName xml.Name `xml:"testsuites"`
			Suites  []struct {
				Tests    int `xml:"tests,attr"`
				Failures int `xml:"failures,attr"`
				Errors   int `xml:"errors,attr"`
				Cases    []struct {
					Name    string    `xml:"name,attr"`
					Failure *struct{} `xml:"failure"`
					Error   *struct{} `xml:"error"`
				} `xml:"testcase"`
			} `xml:"testsuite"`
		}
		if err := xml.Unmarshal([]byte(data), &doc); err != nil {
			ts.Fatalf("report %s: not JUnit XML: %v", args[1], err)
		}
		var cases, failures, errs int
		for _, s := range doc.Suites {
			nf, ne := 0, 0
			for _, c := range s.Cases {
				if c.Name == "" {
					ts.Fatalf("report %s: a testcase without a name", args[1])
				}
				if c.Failure != nil {
					nf++
				}
				if c.Error != nil {
					ne++
				}
			}
			if s.Tests != len(s.Cases) || s.Failures != nf || s.Errors != ne {
				ts.Fatalf("report %s: a suite says tests=%d failures=%d errors=%d, its testcases %d, %d, %d", args[1], s.Tests, s.Failures, s.Errors, len(s.Cases), nf, ne)
			}
			cases, failures, errs = cases+len(s.Cases), failures+nf, errs+ne
		}
		got["cases"], got["fail"], got["undecided"] = strconv.Itoa(cases), strconv.Itoa(failures), strconv.Itoa(errs)
		got["pass"] = strconv.Itoa(cases - failures - errs)
	case "html":
		lower := strings.ToLower(data)
		for _, tag := range []string{"<html", "</html>", "<body", "</body>"} {
			if !strings.Contains(lower, tag) {
				ts.Fatalf("report %s: no %s", args[1], tag)
			}
		}
		// Self-contained: nothing fetched from elsewhere.
		for _, ext := range []string{`src="http`, `href="http`, `src='http`, `@import`} {
			if strings.Contains(lower, ext) {
				ts.Fatalf("report %s: loads %s…, a report must be self-contained", args[1], ext)
			}
		}
		for k, v := range want {
			if k != "contains" {
				ts.Fatalf("report html: only contains=TEXT is checked, not %s", k)
			}
			if !strings.Contains(data, v) {
				ts.Fatalf("report %s: does not mention %q", args[1], v)
			}
		}
		return
	default:
		ts.Fatalf("report: unknown kind %q", args[0])
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok && strings.HasPrefix(k, "kind.") {
			g, ok = "0", true // no case of that kind
		}
		if !ok {
			ts.Fatalf("report %s: cannot check %s", args[0], k)
		}
		if g != v {
			ts.Fatalf("report %s: %s=%s, want %s", args[1], k, g, v)
		}
	}
}

// waitfile GLOB [TIMEOUT] waits (by default up to a minute) until a file
// matches GLOB.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: waitfile glob [timeout]")
	}
	limit := time.Minute
	if len(args) == 2 {
		d, err := time.ParseDuration(args[1])
		ts.Check(err)
		limit = d
	}
	deadline := time.Now().Add(limit)
	for {
		m, err := filepath.Glob(ts.MkAbs(args[0]))
		ts.Check(err)
		if len(m) > 0 {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("no file matches %s after %s", args[0], limit)
		}
		if bg := ts.BackgroundCmds(); len(bg) > 0 && allEnded(bg) {
			// Check once more: the file may have come just before.
			if m, _ := filepath.Glob(ts.MkAbs(args[0])); len(m) == 0 {
				ts.Fatalf("no file matches %s, and the background command has ended (wait for its output)", args[0])
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// noworkers fails if a process whose command line mentions the script's
// work directory (every worker's spec file lies under it) is still
// running, zombies excepted.
func cmdNoWorkers(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: noworkers")
	}
	// The slash: another script's $WORK may start with this one's
	// (script-powerloss, script-powerloss_dsn).
	work := ts.Getenv("WORK") + "/"
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	ts.Check(err)
	var left []string
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), work) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X') {
			continue
		}
		left = append(left, fmt.Sprintf("pid %s: %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(b), "\x00", " ")))
	}
	if len(left) > 0 {
		ts.Fatalf("worker processes left behind:\n%s", strings.Join(left, "\n"))
	}
}

// emptydir DIR fails if DIR holds anything.
func cmdEmptyDir(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: [!] emptydir dir")
	}
	ents, err := os.ReadDir(ts.MkAbs(args[0]))
	ts.Check(err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if neg && len(names) == 0 {
		ts.Fatalf("%s is empty", args[0])
	}
	if !neg && len(names) > 0 {
		ts.Fatalf("%s is not empty: %v", args[0], names)
	}
}

// closedport VAR sets VAR to a loopback port nothing listens on (it was
// just opened and closed).
func cmdClosedPort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: closedport VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	port := l.Addr().(*net.TCPAddr).Port
	ts.Check(l.Close())
	ts.Setenv(args[0], strconv.Itoa(port))
}

// containersAvailable says whether the containers backend can run here:
// the podman socket and the local images (Makefile PODMAN_ENV).
func containersAvailable() bool {
	host := os.Getenv("DOCKER_HOST")
	sock, ok := strings.CutPrefix(host, "unix://")
	if !ok || os.Getenv("CRASHMATRIX_POSTGRES_IMAGE") == "" || os.Getenv("CRASHMATRIX_NEO4J_IMAGE") == "" {
		return false
	}
	_, err := os.Stat(sock)
	_, perr := exec.LookPath("podman")
	return err == nil && perr == nil
}

var containerCreated = regexp.MustCompile(`Container created: ([0-9a-f]{12,64})`)

// nocontainers LOG fails unless LOG (a copy of certify's stderr) names the
// containers it created and none of them exists any more.
func cmdNoContainers(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: nocontainers logfile")
	}
	ids := containerCreated.FindAllStringSubmatch(ts.ReadFile(args[0]), -1)
	if len(ids) == 0 {
		ts.Fatalf("%s names no created container", args[0])
	}
	for _, m := range ids {
		// podman container exists: 0 it exists, 1 it does not.
		err := exec.Command("podman", "container", "exists", m[1]).Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			ts.Fatalf("container %s is still there", m[1])
		case errors.As(err, &ee) && ee.ExitCode() == 1:
		default:
			ts.Fatalf("podman container exists %s: %v", m[1], err)
		}
	}
}

// allEnded says whether every command has exited and been reaped.
func allEnded(cmds []*exec.Cmd) bool {
	for _, c := range cmds {
		if c.Process == nil || !errors.Is(c.Process.Signal(syscall.Signal(0)), os.ErrProcessDone) {
			return false
		}
	}
	return true
}

// nomounts fails if a lazy mount (faults/lazyfs) under $WORK is in
// /proc/mounts; "! nomounts" fails if there is none.
// waitmount waits (up to a minute) until one lazy mount under $WORK has
// been in place for a whole second: a run to be killed is then killed
// with a mount of its own in place. A mount seen only once may belong to a
// case about to end and unmount it before the kill lands (a CI run saw
// that); a case that waits out a dead worker's long lease keeps its mount
// for seconds.
func cmdWaitMount(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: waitmount")
	}
	const held = time.Second
	since := map[string]time.Time{} // mount dir -> first seen
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		ms, err := lazyfs.Mounts()
		ts.Check(err)
		now := time.Now()
		seen := map[string]time.Time{}
		for _, m := range ms {
			if !strings.HasPrefix(m.Dir, ts.Getenv("WORK")+"/") {
				continue
			}
			first, ok := since[m.Dir]
			if !ok {
				first = now
			}
			if now.Sub(first) >= held {
				return
			}
			seen[m.Dir] = first
		}
		since = seen
	}
	ts.Fatalf("no lazy mount under $WORK in place for %v within a minute", held)
}

func cmdNoMounts(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 0 {
		ts.Fatalf("usage: nomounts")
	}
	ms, err := lazyfs.Mounts()
	ts.Check(err)
	var left []string
	for _, m := range ms {
		if strings.HasPrefix(m.Dir, ts.Getenv("WORK")+"/") {
			left = append(left, fmt.Sprintf("%s (pid %d)", m.Dir, m.PID))
		}
	}
	switch {
	case !neg && len(left) > 0:
		ts.Fatalf("lazy mounts left behind:\n%s", strings.Join(left, "\n"))
	case neg && len(left) == 0:
		ts.Fatalf("no lazy mount under $WORK")
	}
}
