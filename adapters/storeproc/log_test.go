package storeproc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/reference"
)

// TestStoreLogStaysOutOfTheDataDirectory: the harness writes nothing into
// the store's data directory (a power loss judges what the store made
// there; its log once made a store that kept its data elsewhere look
// exercised). Each process's whole stderr goes to Options.LogDir, and an
// error about the process names that file; a log folder inside the data
// directory is refused.
func TestStoreLogStaysOutOfTheDataDirectory(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	cmd := python(t, "", filepath.Join(filepath.Dir(file), "testdata", "badstore.py"), "exit-mid-request")
	empty := func(dir string) {
		t.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			t.Errorf("the harness left %s in the store's data directory", e.Name())
		}
	}
	for _, withLog := range []bool{true, false} {
		dir, logs := t.TempDir(), ""
		if withLog {
			logs = filepath.Join(t.TempDir(), "logs")
		}
		c, err := storeproc.Start(context.Background(), storeproc.Options{Command: cmd, Dir: dir, LogDir: logs, HelloTimeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Stores().Ops.Get(context.Background(), "op-1")
		_ = c.Close()
		var pe *storeproc.ProtocolError
		if !errors.As(err, &pe) {
			t.Fatalf("got %v, want a *storeproc.ProtocolError", err)
		}
		empty(dir)
		if !withLog {
			if pe.Log != "" || strings.Contains(err.Error(), "whole stderr") {
				t.Errorf("no LogDir, yet the error names a log %q: %v", pe.Log, err)
			}
			continue
		}
		if filepath.Dir(pe.Log) != logs || !strings.HasPrefix(filepath.Base(pe.Log), "store-") {
			t.Fatalf("the error names the log %q, want a store-<pid>.log in %s", pe.Log, logs)
		}
		if !strings.Contains(err.Error(), "the store's whole stderr: "+pe.Log) {
			t.Errorf("the error does not point to the log %s:\n%v", pe.Log, err)
		}
		b, rerr := os.ReadFile(pe.Log)
		if rerr != nil || !strings.Contains(string(b), "badstore starting") || !strings.Contains(string(b), "badstore: segfault, say") {
			t.Errorf("the log %s holds %q (%v), want all of the store's stderr", pe.Log, b, rerr)
		}
	}
	dir := t.TempDir()
	_, err := storeproc.Start(context.Background(), storeproc.Options{Command: cmd, Dir: dir, LogDir: filepath.Join(dir, "logs")})
	if !errors.Is(err, reference.ErrInvalidArgument) || !strings.Contains(err.Error(), "inside the store's data directory") {
		t.Errorf("a log folder inside the data directory: got %v, want it refused", err)
	}
	empty(dir)
}
