package main

import (
	"os"
	"path/filepath"
	"testing"
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
