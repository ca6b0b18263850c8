package storeproc_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/adapters/storeproc"
	"github.com/crashmatrix/crashmatrix/reference"
)

// echoStoreEnv turns the test binary into a trivial store process for
// BenchmarkStoreCall: it answers hello, ops.get with a fixed operation,
// and states.cas with one crash window (at) before its reply, so the
// benchmark measures the harness's side of the protocol, not a store.
const echoStoreEnv = "CRASHMATRIX_TEST_ECHO_STORE"

// echoOperation is the operation every ops.get of the echo store returns.
var echoOperation = reference.Operation{OperationID: "op-1", Space: "s", DocumentID: "d", ExpectedRevision: 3,
	PlanFingerprint: "fp-0123456789abcdef", Stage: reference.Prepared, UpdatedAt: 1700000000000, Attempts: 1}

func echoStore() int {
	in := bufio.NewReader(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = out.Write(append(b, '\n'))
		_ = out.Flush()
	}
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			return 0
		}
		var req struct {
			ID int64  `json:"id"`
			Op string `json:"op"`
		}
		if err := json.Unmarshal(line, &req); err != nil {
			fmt.Fprintln(os.Stderr, "echo store:", err)
			return 2
		}
		switch req.Op {
		case "hello":
			send(map[string]any{"id": req.ID, "ok": map[string]any{"protocol": storeproc.Protocol, "name": "echo", "stores": []string{"operations", "states"}, "reopen": false}})
		case "ops.get":
			send(map[string]any{"id": req.ID, "ok": map[string]any{"operation": echoOperation}})
		case "states.cas":
			send(map[string]any{"id": req.ID, "at": map[string]any{"point": "echo/beforeStateCommit", "step": 1}})
			if _, err := in.ReadBytes('\n'); err != nil {
				return 0
			}
			send(map[string]any{"id": req.ID, "ok": map[string]any{"swapped": true}})
		default:
			send(map[string]any{"id": req.ID, "ok": map[string]any{}})
		}
	}
}

// BenchmarkStoreCall measures one store protocol call from the harness's
// side against the echo store: ns/op is the round trip, cpu-µs/op the CPU
// this process spent per call (the store process's own is not counted),
// allocs/op the harness's allocations.
func BenchmarkStoreCall(b *testing.B) {
	b.Setenv(echoStoreEnv, "1")
	c, err := storeproc.Start(context.Background(), storeproc.Options{Command: os.Args[0] + " -test.run=^$", Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	st := c.Stores()
	ctx := context.Background()
	next := reference.DocumentState{Space: "s", DocumentID: "d", Revision: 4, OperationID: "op-1", ContentHash: "h", ExtractionFingerprint: "x",
		Status: reference.DocActive, FactSources: []reference.EdgeKey{}, NodeIDs: []string{"n1", "n2"}}
	calls := []struct {
		name string
		call func() error
	}{
		{"get", func() error {
			op, err := st.Ops.Get(ctx, "op-1")
			if err == nil && op != echoOperation {
				err = fmt.Errorf("got %+v, want %+v", op, echoOperation)
			}
			return err
		}},
		{"cas-with-window", func() error {
			ok, err := st.States.CompareAndSet(ctx, 3, next)
			if err == nil && !ok {
				err = fmt.Errorf("not swapped")
			}
			return err
		}},
	}
	for _, tc := range calls {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			before := cpuTime()
			for b.Loop() {
				if err := tc.call(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

// cpuTime is the CPU this process has used (user and system, all its
// threads; not its children's).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
