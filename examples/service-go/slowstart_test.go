package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/serviceproc"
	"github.com/crashmatrix/crashmatrix/adapters/serviceproc/refservice"
	"github.com/crashmatrix/crashmatrix/faults"
	"github.com/crashmatrix/crashmatrix/sim"
	"github.com/crashmatrix/crashmatrix/sim/catalogue"
	"github.com/crashmatrix/crashmatrix/sim/verdict"
)

// speakSlow is the reference with its own stores, slow to start as the
// supervisor's reader (role read, holder "supervisor": the read of the
// stores after a case) on a loaded machine: the first such start of the
// case at beforeGraphWrite ("once", noted in dir) or every one ("always")
// sleeps 9 s before it answers hello.
func speakSlow(dir, mode string) int {
	in := bufio.NewReader(os.Stdin)
	hello, err := in.ReadBytes('\n')
	if err != nil {
		return 1
	}
	var req struct {
		Args serviceproc.Hello `json:"args"`
	}
	if err := json.Unmarshal(hello, &req); err != nil {
		return 1
	}
	if req.Args.Role == serviceproc.RoleRead && req.Args.Holder == "supervisor" && strings.Contains(req.Args.Space, "beforegraphwrite") {
		f, err := os.OpenFile(filepath.Join(dir, "slept"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
		}
		if err == nil || mode == "always" {
			time.Sleep(9 * time.Second)
		}
	}
	if err := (refservice.Options{OwnStores: true}).Serve(io.MultiReader(bytes.NewReader(hello), in), os.Stdout); err != nil {
		return 1
	}
	return 0
}

// TestSlowReaderStartRetried: a reader of the service's own stores that
// gives no hello within the start timeout (4 s here) is started once
// more: the case is judged (it passes), its notes and the report's start
// line count the retry. A service whose reader never answers leaves the
// case undecided (exit 2), retried once, not hidden.
func TestSlowReaderStartRetried(t *testing.T) {
	run := func(mode string) verdict.Report {
		dir := t.TempDir()
		r, err := sim.NewRunner(sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: t.TempDir(), Seed: 1,
			Launcher: sim.ReexecLauncher{Binary: os.Args[0], Test: "^$"},
			Service:  &sim.ServiceSpec{Command: os.Args[0] + " speak-own-slow " + dir + " " + mode, Timeout: 4 * time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		cases := catalogue.Selection{Points: []faults.Point{faults.BeforeGraphWrite}, Kinds: []faults.Kind{faults.Crash}}.Cases(catalogue.Probe{}, catalogue.Lease(r.Config().LeaseTTL), 1)
		return r.RunAll(context.Background(), cases, 1, nil)
	}
	rep := run("once")
	if rep.ExitCode != 0 || len(rep.Results) != 1 || !strings.Contains(rep.StoreStarts, "1 service start retried (cases: 1)") {
		t.Fatalf("a reader slow once: exit %d, start line %q, %d results (%s, notes %q); want a pass with one retry counted", rep.ExitCode, rep.StoreStarts, len(rep.Results), rep.Results[0].Verdict, rep.Results[0].Notes)
	}
	res := rep.Results[0]
	if !strings.Contains(strings.Join(res.Notes, "; "), "retried") {
		t.Errorf("the case's notes do not say its start was retried: %q", res.Notes)
	}
	rep = run("always")
	if rep.ExitCode != 2 || rep.Results[0].Verdict != verdict.Undecided || !strings.Contains(strings.Join(rep.Results[0].Notes, "; "), "no reply to hello within 4s") {
		t.Fatalf("a reader that never answers: exit %d, %s, notes %q; want undecided (exit 2) on no hello", rep.ExitCode, rep.Results[0].Verdict, rep.Results[0].Notes)
	}
}
