package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The note on the containers' CPU weight is given where cgroup v1 has
// podman's /libpod_parent at the default weight, and only there.
func TestContainersWeightNote(t *testing.T) {
	root := t.TempDir()
	if note := containersWeightNote(root); note != "" {
		t.Errorf("no libpod_parent group: %q, want no note", note)
	}
	dir := filepath.Join(root, "cpu", "libpod_parent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for shares, want := range map[string]bool{"1024\n": true, "8192\n": false} {
		if err := os.WriteFile(filepath.Join(dir, "cpu.shares"), []byte(shares), 0o644); err != nil {
			t.Fatal(err)
		}
		note := containersWeightNote(root)
		if got := note != ""; got != want || want && !strings.Contains(note, "docs/ci.md") {
			t.Errorf("cpu.shares %q: note %q, want one: %v", strings.TrimSpace(shares), note, want)
		}
	}
}
