package explorerun

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/reference"
	"github.com/crashmatrix/crashmatrix/sim"
	_ "github.com/crashmatrix/crashmatrix/sim/embedded" // registers sqlite
)

// exploreOptions are a small in-process search of seed 1 on SQLite under
// bugs, writing into dir.
func exploreOptions(dir string, out, errs *bytes.Buffer, bugs ...reference.Bug) ExploreOptions {
	return ExploreOptions{
		Config:  sim.Config{Backend: sim.BackendSpec{Name: "sqlite"}, WorkDir: filepath.Join(dir, "work"), InProcess: true, Seed: 1, Bugs: bugs},
		Backend: "sqlite", Seed: 1, ShardCount: 1, Budget: time.Minute, Parallel: 2, Confirm: 1, OutDir: filepath.Join(dir, "found"),
		Replay: func(path string) string { return "crashmatrix run " + path },
		Out:    out, Err: errs,
	}
}

// Explore on a mutant finds the violation, shrinks it, writes the
// scenario and says so with exit code 1; on the reference it finds
// nothing within its schedules and exits 0.
func TestExploreWritesTheShrunkFinding(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	o := exploreOptions(dir, &out, &errs, reference.BugSkipRevisionCheck)
	o.Target = "I2"
	code, err := Explore(context.Background(), o)
	if err != nil || code != 1 {
		t.Fatalf("mutant %s: code %d, err %v; want 1\n%s%s", reference.BugSkipRevisionCheck, code, err, out.String(), errs.String())
	}
	if !regexp.MustCompile(`(?m)^exploring: seed 1, shard 0/1, budget 1m0s, backend sqlite, in-process, \d+ store windows$`).MatchString(out.String()) {
		t.Errorf("no head line:\n%s", out.String())
	}
	m := regexp.MustCompile(`(?m)^VIOLATION I2 [a-z -]+ in schedule \d+ of seed 1, found after .*\n(?s:.*)^scenario: (\S+)\nreplay:   crashmatrix run (\S+)$`).FindStringSubmatch(out.String())
	if m == nil || m[1] != m[2] {
		t.Fatalf("no violation, scenario and replay lines:\n%s", out.String())
	}
	b, err := os.ReadFile(m[1])
	if err != nil || !strings.Contains(string(b), string(reference.BugSkipRevisionCheck)) {
		t.Fatalf("scenario %s (%v) does not name the mutant:\n%s", m[1], err, b)
	}

	dir = t.TempDir()
	out.Reset()
	o = exploreOptions(dir, &out, &errs)
	o.Max = 20
	if code, err := Explore(context.Background(), o); err != nil || code != 0 {
		t.Fatalf("reference: code %d, err %v; want 0\n%s%s", code, err, out.String(), errs.String())
	}
	if !strings.Contains(out.String(), "20 schedules in ") || !strings.HasSuffix(out.String(), "no violation found (seed 1)\n") {
		t.Fatalf("reference:\n%s", out.String())
	}
}

// Explore draws disk errors only where they run on the store's own files:
// on a backend that is not embedded (here the in-memory one; the same for
// a server backend) --disk-errors exits 2 and says why.
func TestExploreDiskErrorsNeedAnEmbeddedBackend(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	o := exploreOptions(dir, &out, &errs)
	o.Config.Backend.Name, o.Backend, o.DiskErrors = "memory", "memory", 0.3
	code, err := Explore(context.Background(), o)
	if err != nil || code != 2 || !strings.Contains(errs.String(), "--disk-errors: not tested on backend memory (") {
		t.Fatalf("--disk-errors on the memory backend: code %d, err %v; want 2 and the reason\n%s%s", code, err, out.String(), errs.String())
	}
}
