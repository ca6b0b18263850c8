package worker

import (
	"os"
	"path/filepath"
	"testing"
)

// A worker notes each process it starts of its own before it starts it
// (NoteSpawn): the supervisor looks through /proc after a worker that
// noted one, or whose starts file it cannot read, and not after one that
// opened its stores without starting a process (a spare).
func TestSpawnedFollowsTheNotes(t *testing.T) {
	defer func(old string) { spawnNotes = old }(spawnNotes)
	dir := t.TempDir()
	path := filepath.Join(dir, "worker-1-w1.starts")
	if Spawned(path) {
		t.Error("no starts file: Spawned = true, want false (the worker wrote nothing, so started nothing)")
	}
	if !Spawned("") {
		t.Error(`no starts file named (""): Spawned = false, want true (nothing says)`)
	}
	spawnNotes = path
	ready := NoteOpen(path)
	ready()
	if Spawned(path) {
		t.Error("an open that took a spare: Spawned = true, want false")
	}
	if got := StoreStarts(path); len(got) != 1 {
		t.Fatalf("StoreStarts = %v, want one open", got)
	}
	ready = NoteOpen(path)
	if err := NoteSpawn(); err != nil {
		t.Fatal(err)
	}
	ready()
	if !Spawned(path) {
		t.Error("after NoteSpawn: Spawned = false, want true")
	}
	if got := StoreStarts(path); len(got) != 2 {
		t.Errorf("StoreStarts with a spawn noted = %v, want two opens", got)
	}
	// A note that cannot be written stops the start.
	spawnNotes = filepath.Join(dir, "no-such-folder", "w.starts")
	if err := NoteSpawn(); err == nil {
		t.Error("NoteSpawn into a folder that does not exist: nil error, want one (the start must not happen)")
	}
	// A file that cannot be read: sweep.
	unreadable := filepath.Join(dir, "dir.starts")
	if err := os.Mkdir(unreadable, 0o755); err != nil {
		t.Fatal(err)
	}
	if !Spawned(unreadable) {
		t.Error("a starts file that cannot be read: Spawned = false, want true")
	}
}
