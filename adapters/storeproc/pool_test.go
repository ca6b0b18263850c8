package storeproc_test

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// pids are the store processes whose logs are in dir (each leaves
// store-<pid>.log in Options.LogDir).
func pids(t *testing.T, dir string) []int {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "store-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range logs {
		pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(l), "store-"), ".log"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pid)
	}
	return out
}

// TestPoolReopensForTheNextClient: the example stores (Python, Node.js,
// Java) declare reopen, so a pooled client's process is told close and
// kept; the next client greets it on another directory, where it sees that
// directory's data and not the one it served before, and back again;
// Pool.Close ends it.
func TestPoolReopensForTheNextClient(t *testing.T) {
	t.Run("python", func(t *testing.T) { testPoolReopens(t, python(t, "sqlite_store.py")) })
	t.Run("node", func(t *testing.T) {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatalf("node is missing: the Node.js example store (examples/node) cannot be tested: %v", err)
		}
		testPoolReopens(t, node+" "+filepath.Join(examples(t), "..", "node", "store.js"))
	})
	t.Run("java", func(t *testing.T) {
		if testing.Short() {
			t.Skip("builds examples/java with Maven")
		}
		testPoolReopens(t, javaStore(t))
	})
}

func testPoolReopens(t *testing.T, cmd string) {
	ctx := context.Background()
	pool := storeproc.NewPool()
	defer pool.Close()
	dirA, dirB := t.TempDir(), t.TempDir()
	// Each directory's store processes log in a folder of their own.
	logs := map[string]string{dirA: t.TempDir(), dirB: t.TempDir()}
	open := func(dir string) (*storeproc.Client, reference.Stores) {
		t.Helper()
		c, err := storeproc.Start(ctx, storeproc.Options{Command: cmd, Dir: dir, LogDir: logs[dir], Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return c, c.Stores()
	}
	c, st := open(dirA)
	op, plan := storetest.FixtureOp("pool", "d1", "op-pool", 0, 1000)
	if created, err := st.Ops.CreateIfAbsent(ctx, op, plan); err != nil || !created {
		t.Fatalf("create on A: %v %v", created, err)
	}
	_ = c.Close()
	if n := pool.Idle(); n != 1 {
		t.Fatalf("after the first client closed, %d processes idle in the pool, want 1", n)
	}
	started := pids(t, logs[dirA])
	if len(started) != 1 {
		t.Fatalf("store processes started on A: %v, want one", started)
	}

	c, st = open(dirB)
	if n := pool.Idle(); n != 0 {
		t.Fatalf("the second client left %d processes idle, want it to take the pooled one", n)
	}
	if p := pids(t, logs[dirB]); len(p) != 0 {
		t.Fatalf("the second client started store processes %v instead of reusing %v", p, started)
	}
	if _, err := st.Ops.Get(ctx, "op-pool"); !errors.Is(err, reference.ErrNotFound) {
		t.Fatalf("B read A's operation through the reused process (err %v): it did not reopen on B", err)
	}
	_ = c.Close()

	c, st = open(dirA)
	if got, err := st.Ops.Get(ctx, "op-pool"); err != nil || got.OperationID != "op-pool" {
		t.Fatalf("A read again through the reused process: %+v %v", got, err)
	}
	_ = c.Close()
	if p := pids(t, logs[dirA]); len(p) != 1 {
		t.Fatalf("store processes started on A: %v, want still the one", p)
	}

	_ = pool.Close()
	if n := pool.Idle(); n != 0 {
		t.Fatalf("%d processes idle after Pool.Close", n)
	}
	if err := syscall.Kill(started[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("store process %d still exists after Pool.Close (kill 0: %v)", started[0], err)
	}
}

// TestPoolStopsStoresThatDoNotReopen: a store that does not declare reopen
// is stopped when its client closes, as without a pool.
func TestPoolStopsStoresThatDoNotReopen(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	cmd := python(t, "", filepath.Join(filepath.Dir(file), "testdata", "badstore.py"), "late")
	pool := storeproc.NewPool()
	defer pool.Close()
	logs := t.TempDir()
	c, err := storeproc.Start(context.Background(), storeproc.Options{Command: cmd, Dir: t.TempDir(), LogDir: logs, Pool: pool, HelloTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	if n := pool.Idle(); n != 0 {
		t.Fatalf("a store that did not declare reopen: %d processes idle in the pool, want 0", n)
	}
	p := pids(t, logs)
	if len(p) != 1 {
		t.Fatalf("store processes: %v", p)
	}
	if err := syscall.Kill(p[0], 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("store process %d still exists after its client closed (kill 0: %v)", p[0], err)
	}
}
