package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bench-store names a store command whose program is a #! script (a
// pyenv shim): it runs before the store at every store process start.
func TestScriptLauncher(t *testing.T) {
	dir := t.TempDir()
	shim := filepath.Join(dir, "python3")
	if err := os.WriteFile(shim, []byte("#!/bin/sh\nexec /usr/bin/env python3 \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := scriptLauncher(shim + " -S -m sqlite_store"); got != shim {
		t.Fatalf("a #! shim: %q, want %q", got, shim)
	}
	sh, err := os.Executable() // a Go binary, not a script
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{sh + " -x", "", filepath.Join(dir, "missing") + " a"} {
		if got := scriptLauncher(cmd); got != "" {
			t.Fatalf("%q: %q, want none", cmd, got)
		}
	}
}

// The profile bench-store prints under a ratio target not met: the
// processes started for the workers (the spares, and one per open that
// took none) times a start's CPU, as a share of the round's CPU.
func TestStoreProfile(t *testing.T) {
	r := storeRound{opens: 410, died: 90, spares: 100, handed: 400, returned: 300, cpu: 10 * time.Second, goCPU: 5 * time.Second, self: 2 * time.Second, goSelf: time.Second, wall: 20 * time.Second, starts: "store starts: x"}
	if r.started() != 110 {
		t.Fatalf("started %d, want 110: 100 spares and 10 opens that took none", r.started())
	}
	got := storeProfile([]storeRound{r}, storeStartCost{cpu: 10 * time.Millisecond, first: time.Millisecond})
	for _, want := range []string{"10s of CPU against 5s for the Go round (2.00x)", "110 store processes started (100 of them ahead of need; 400 worker store opens took one ready; 90 store processes died with their worker, which a crash needs, and the spares kept ready made up the other 20)",
		"about 1.1s, 11% of the round's CPU", "the rest, 8.9s (1.78x the Go round's CPU)", "the supervisor's own CPU 2s against 1s in the Go round; the workers' with their store processes 8s against 4s", "over its wall time 20s", "store starts: x"} {
		if !strings.Contains(got, want) {
			t.Errorf("profile %q\nlacks %q", got, want)
		}
	}
}
