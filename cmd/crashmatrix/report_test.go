package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/scenarios"
	"github.com/spf13/cobra"
)

// execute runs one subcommand in this process (in-process mode: no worker
// processes) and returns its output and exit code.
func execute(t *testing.T, cmd *cobra.Command, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(context.Background())
	var ee exitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.code
	}
	t.Fatalf("%s %v: %v\n%s", cmd.Name(), args, err, out.String())
	return "", 0
}

// The memory store forgets everything on restart: certify fails 88 cases,
// and the terminal's last screen names each broken invariant with its
// count, the case to look at first and the command that replays it, in two
// screens at most.
func TestCertifyMemoryEndsWithWhatBrokeAndHowToReplayIt(t *testing.T) {
	out, code := execute(t, certifyCmd(), "--backend", "memory", "--in-process", "--quiet", "--workdir", t.TempDir())
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) > 100 {
		t.Errorf("%d lines: more than two screens by default", len(lines))
	}
	tail := lines[len(lines)-20:]
	last := strings.Join(tail, "\n")
	// I9: an instance reads what it wrote itself, not what another one
	// committed since (class stale-reader), as two processes do each with
	// its own memory.
	invs := []string{"I1 one plan per operationId", "I2 no stale-revision commit", "I4 legal stages", "I5 liveness", "I7 leases", "I8 plan save", "I9 acknowledged durability"}
	for _, inv := range invs {
		re := regexp.MustCompile(regexp.QuoteMeta(inv) + `\s+\d+ cases?,\s+\d+ violations?.*; rarest: \S`)
		if !re.MatchString(last) {
			t.Errorf("the last screen does not name %s with its counts and rarest case:\n%s", inv, last)
		}
	}
	replay := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(selfCommand()) + ` certify --backend memory --in-process (--point \w+ --kind \w+|--class [\w-]+) -v$`)
	if n := len(replay.FindAllString(last, -1)); n != len(invs) {
		t.Errorf("%d replay commands on the last screen, want one per broken invariant (%d):\n%s", n, len(invs), last)
	}
	if !strings.Contains(out, "root cause") || !regexp.MustCompile(`I2 \(\d+ violations\)`).MatchString(out) {
		t.Errorf("the I2 that follows from the forgotten operations is not folded under I5:\n%s", out)
	}
	if strings.Contains(out, "broken invariants [") {
		t.Errorf("the verdict is a bare list of invariants:\n%s", out)
	}
}

// run on a scenario that expects its failure prints its violations with -v
// and writes an HTML report whose header describes the run, AS EXPECTED
// (as the ok line and exit 0 say) with the evidence, plus JSON and JUnit.
func TestRunReportsAFailingScenarioWithItsEvidence(t *testing.T) {
	dir := t.TempDir()
	html, js, junit := filepath.Join(dir, "r.html"), filepath.Join(dir, "r.json"), filepath.Join(dir, "r.xml")
	out, code := execute(t, runCmd(), "../../scenarios/library/mutant-skip-revision-check.yaml", "--in-process", "-v",
		"--workdir", dir, "--html", html, "--json", js, "--junit", junit)
	if code != 0 {
		t.Fatalf("exit %d (the scenario expects its failure, so it should pass):\n%s", code, out)
	}
	for _, want := range []string{"I2: revision", "replay:  " + selfCommand() + " run ../../scenarios/library/mutant-skip-revision-check.yaml --in-process -v"} {
		if !strings.Contains(out, want) {
			t.Errorf("-v output lacks %q:\n%s", want, out)
		}
	}
	if m := regexp.MustCompile(`history: (\S+/history\.jsonl)`).FindStringSubmatch(out); m == nil {
		t.Errorf("-v names no history file for the in-process scenario:\n%s", out)
	} else if _, err := os.Stat(m[1]); err != nil {
		t.Errorf("the history file it names: %v", err)
	}
	b, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{">AS EXPECTED<", "expectation met:</b> broke I2", "seed 1", "1 case in", "bug <b>skip-revision-check</b>", "revision 2 was committed by an operation", `class="cited"`} {
		if !strings.Contains(page, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	if strings.Contains(page, "0001-01-01") || strings.Contains(page, ">CERTIFIED<") || strings.Contains(page, "NOT CERTIFIED") {
		t.Errorf("HTML header does not describe the run")
	}
	if x, _ := os.ReadFile(junit); !bytes.Contains(x, []byte(`<property name="replay" value="`+selfCommand()+` run --details --in-process ../../scenarios/library/mutant-skip-revision-check.yaml">`)) {
		t.Errorf("JUnit does not carry the command that reruns the run:\n%s", x)
	}
	for _, f := range []string{js, junit} {
		if b, err := os.ReadFile(f); err != nil || !bytes.Contains(b, []byte("skip-revision-check")) {
			t.Errorf("%s: %v, or it does not name the scenario's bug", f, err)
		}
	}
}

// explore writes the violation and what happened into the shrunk scenario
// as comments, counts steps as the file shows them, and names this binary
// in the replay line.
func TestExploreWritesTheViolationIntoTheShrunkScenario(t *testing.T) {
	dir := t.TempDir()
	out, code := execute(t, exploreCmd(), "--seed", "1", "--max", "400", "--bug", "skip-revision-check", "--invariant", "I2", "--out", dir, "--parallel", "2")
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a violation):\n%s", code, out)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if len(files) != 1 {
		t.Fatalf("want one scenario written, got %v", files)
	}
	b, _ := os.ReadFile(files[0])
	text := string(b)
	for _, re := range []string{`(?m)^# violation: I2: `, `(?m)^# what happened: w\d: .*FAULT `, `(?m)^# operations: A = `,
		`(?m)^# replay: ` + regexp.QuoteMeta(selfCommand()+" run "+files[0]+" --repeat 10 --in-process") + `$`} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("the scenario lacks %s:\n%s", re, text)
		}
	}
	m := regexp.MustCompile(`to (\d+) steps? \((\d+) actions?`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("description does not say how many steps:\n%s", text)
	}
	if n, _ := strconv.Atoi(m[1]); n != strings.Count(text, "\n  - worker: ") {
		t.Errorf("description says %d steps, the file has %d", n, strings.Count(text, "\n  - worker: "))
	}
	lines := regexp.MustCompile(`shrunk from .*?(\d+) document lines?\) to .*?(\d+) document lines?\)`).FindStringSubmatch(out)
	if lines == nil {
		t.Fatalf("explore does not say how many document lines it shrank:\n%s", out)
	}
	before, _ := strconv.Atoi(lines[1])
	after, _ := strconv.Atoi(lines[2])
	if after >= before {
		t.Errorf("document contents did not shrink: %d lines before, %d after", before, after)
	}
	if !strings.Contains(out, "replay:   "+selfCommand()+" run ") {
		t.Errorf("the replay line does not name this binary (%s):\n%s", selfCommand(), out)
	}
}

// The replay command of a library scenario names its file by the
// scenario's name; every library file must be named after its scenario.
func TestLibraryScenariosLiveWhereTheirReplayPointsTo(t *testing.T) {
	lib, err := scenarios.Library()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range lib {
		if _, err := os.Stat(filepath.Join("../..", "scenarios/library/"+s.Name+".yaml")); err != nil {
			t.Errorf("scenario %s: %v (its replay command would name a missing file)", s.Name, err)
		}
	}
}
