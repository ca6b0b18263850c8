package sim_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crashmatrix/crashmatrix/sim"
)

func TestRoomyDir(t *testing.T) {
	dir := t.TempDir()
	if err := sim.RoomyDir(dir, 1); err != nil {
		t.Fatalf("a writable folder with a byte free: %v", err)
	}
	if err := sim.RoomyDir(dir, 1<<62); err == nil || !strings.Contains(err.Error(), "MiB free, under") {
		t.Fatalf("a folder without 4 EiB free: %v, want it to say how much is free", err)
	}
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := sim.RoomyDir(file, 1); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Fatalf("a file: %v", err)
	}
	if err := sim.RoomyDir(filepath.Join(dir, "missing"), 1); err == nil {
		t.Fatal("a missing folder taken")
	}
}

// Case data goes under TMPDIR when the user set it, else on /dev/shm when
// it has room, else under the system's temporary folder.
func TestCaseRoot(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	if got := sim.CaseRoot(); got != "" {
		t.Fatalf("with TMPDIR set: %q, want TMPDIR (\"\")", got)
	}
	t.Setenv("TMPDIR", "")
	want := ""
	if sim.RoomyDir("/dev/shm", sim.CaseRootMinFree) == nil {
		want = "/dev/shm"
	}
	if got := sim.CaseRoot(); got != want {
		t.Fatalf("without TMPDIR: %q, want %q", got, want)
	}
}
