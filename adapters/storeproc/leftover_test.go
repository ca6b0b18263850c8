package storeproc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
)

// childOf starts a store command that first starts a child of its own (its
// pid in DIR/child), then does what rest says; it returns the client (or
// nil), how long Start took, the pid of that child and the error of Start.
func childOf(t *testing.T, rest string, helloTimeout time.Duration) (*storeproc.Client, time.Duration, int, error) {
	t.Helper()
	dir := t.TempDir()
	script := `sleep 600 & echo $! > "$CRASHMATRIX_STORE_DIR/child"; ` + rest
	t0 := time.Now()
	c, err := storeproc.Start(context.Background(), storeproc.Options{Command: "sh -c " + strconv.Quote(script), Dir: dir, HelloTimeout: helloTimeout})
	took := time.Since(t0)
	b, rerr := os.ReadFile(filepath.Join(dir, "child"))
	if rerr != nil {
		t.Fatalf("the store never started its child: %v", rerr)
	}
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if perr != nil {
		t.Fatal(perr)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	return c, took, pid, err
}

// gone waits up to 2 s for process pid to be gone (or a zombie).
func gone(pid int) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if s := string(b); strings.Contains(s[strings.LastIndexByte(s, ')'):], ") Z ") {
			return true
		}
	}
	return false
}

// A store that hangs before its hello reply is given HelloTimeout, not a
// fixed minute, and is killed with everything it started.
func TestHangingStartIsBoundedAndLeavesNothing(t *testing.T) {
	_, took, child, err := childOf(t, "sleep 600", 2*time.Second)
	if err == nil {
		t.Fatal("Start of a store that never answers hello succeeded")
	}
	if took < 2*time.Second || took > 5*time.Second {
		t.Errorf("Start gave up after %s, want about the 2s start timeout", took)
	}
	if !strings.Contains(err.Error(), "no reply to hello within 2s") || !strings.Contains(err.Error(), "--store-timeout") {
		t.Errorf("the error does not say the store did not start in time, naming the flag: %v", err)
	}
	if !gone(child) {
		t.Errorf("the store's child %d still runs after Start gave up", child)
	}
}

// A store closed, and one killed for breaking the protocol at hello, take
// their children with them.
func TestStoreProcessGroupEndsWithIt(t *testing.T) {
	// The hello reply of a store that then serves nothing (stdin read to
	// its end, as a store does before exiting).
	hello := `read l; echo '{"id":0,"ok":{"protocol":"crashmatrix-store/1","name":"sh","stores":["operations"]}}'; cat >/dev/null`
	c, _, child, err := childOf(t, hello, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if gone(child) {
		t.Fatal("the store's child is gone before Close")
	}
	_ = c.Close()
	if !gone(child) {
		t.Errorf("the store's child %d still runs after Close", child)
	}
	_, _, child, err = childOf(t, `read l; echo '{"id":0,"ok":{"protocol":"other/9","name":"sh","stores":[]}}'; sleep 600`, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "other/9") {
		t.Fatalf("a hello in another protocol: err = %v", err)
	}
	if !gone(child) {
		t.Errorf("the store's child %d still runs after its hello was refused", child)
	}
}

// KillAll ends every store process still running, with its group.
func TestKillAllEndsOpenStores(t *testing.T) {
	hello := `read l; echo '{"id":0,"ok":{"protocol":"crashmatrix-store/1","name":"sh","stores":["operations"]}}'; sleep 600`
	c, _, child, err := childOf(t, hello, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	storeproc.KillAll()
	if !gone(child) {
		t.Errorf("the store's child %d still runs after KillAll", child)
	}
}
