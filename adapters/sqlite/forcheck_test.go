package sqlite

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crashmatrix/crashmatrix/check"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
	"github.com/crashmatrix/crashmatrix/reference"
)

// crashImage writes n documents' operations, plans, states, versions,
// registry entries and graphs through Open (space "sp") and returns the
// database's files as a SIGKILL would leave them then ("", "-wal",
// "-shm": the writer is still open, so nothing was checkpointed).
func crashImage(t testing.TB, n int) map[string][]byte {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crashmatrix.db")
	s, err := Open(path, Options{})
	storetest.Must(t, err)
	defer s.Close()
	for i := range n {
		id := fmt.Sprintf("op%d", i)
		op := storetest.CreateOp(t, s, id, 10)
		plan, err := s.Ops.GetPlan(ctx, id)
		storetest.Must(t, err)
		st := storetest.State(op.Space, op.DocumentID, 1, id, reference.EdgeKey{Source: "a", Type: "T", Target: "b", Rank: int64(i)})
		if ok, err := s.States.CompareAndSet(ctx, 0, st); err != nil || !ok {
			t.Fatalf("state of %s: %v %v", id, ok, err)
		}
		storetest.Must(t, s.States.RecordVersion(ctx, st))
		storetest.Must(t, s.Registry.SaveAll(ctx, op.Space, plan.Registrations))
		storetest.Must(t, s.Writer.Apply(ctx, op.Space, plan.Mutation))
	}
	files := map[string][]byte{}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		files[suffix], err = os.ReadFile(path + suffix)
		storetest.Must(t, err)
	}
	if len(files["-wal"]) == 0 {
		t.Fatalf("no WAL: the image holds nothing the database file lacks")
	}
	return files
}

// placeImage writes the image's files into a new folder (the WAL index
// too when withIndex) and returns the database's path there.
func placeImage(t testing.TB, files map[string][]byte, withIndex bool) string {
	path := filepath.Join(t.TempDir(), "crashmatrix.db")
	for suffix, b := range files {
		if suffix != "-shm" || withIndex {
			storetest.Must(t, os.WriteFile(path+suffix, b, 0o644))
		}
	}
	return path
}

// OpenForCheck reads what Open wrote, refuses every write, and reads a
// crashed writer's files as a restart does: the committed rows that are
// only in the WAL (with or without the WAL index a killed process leaves)
// give the same snapshot as a read-write Open of the same files, and the
// reader changes no byte of them (no checkpoint on close).
func TestOpenForCheckReadsTheWALAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "crashmatrix.db")
	s, err := Open(path, Options{})
	storetest.Must(t, err)
	defer s.Close()
	storetest.ReadOnly(t, s, func() reference.Stores {
		ro, err := OpenForCheck(path, Options{})
		storetest.Must(t, err)
		return ro
	}, "readonly")

	files := crashImage(t, 2)
	for _, withIndex := range []bool{true, false} {
		readPath, rwPath := placeImage(t, files, withIndex), placeImage(t, files, withIndex)
		ro, err := OpenForCheck(readPath, Options{})
		storetest.Must(t, err)
		got, err := check.Take(ctx, ro, "sp", nil, nil, nil)
		storetest.Must(t, err)
		storetest.Must(t, ro.Close())
		rw, err := Open(rwPath, Options{})
		storetest.Must(t, err)
		want, err := check.Take(ctx, rw, "sp", nil, nil, nil)
		storetest.Must(t, err)
		storetest.Must(t, rw.Close())
		if len(got.Ops) != 2 || len(got.States) != 2 || len(got.Graph.Nodes) == 0 || !reflect.DeepEqual(got, want) {
			t.Fatalf("WAL index kept %v: the reader's snapshot\n %+v\nthe read-write open's\n %+v", withIndex, got, want)
		}
		for _, suffix := range []string{"", "-wal"} {
			if after, err := os.ReadFile(readPath + suffix); err != nil || !bytes.Equal(after, files[suffix]) {
				t.Fatalf("WAL index kept %v: the reader changed crashmatrix.db%s (%v)", withIndex, suffix, err)
			}
		}
	}

	// A file not there yet is created as Open creates it.
	missing := filepath.Join(t.TempDir(), "new.db")
	ro, err := OpenForCheck(missing, Options{})
	storetest.Must(t, err)
	snap, err := check.Take(ctx, ro, "sp", nil, nil, nil)
	storetest.Must(t, err)
	storetest.Must(t, ro.Close())
	if _, err := os.Stat(missing); err != nil || len(snap.Ops) != 0 {
		t.Fatalf("a missing file: %v, snapshot %+v", err, snap)
	}
}

// BenchmarkCaseSnapshot is the supervisor's read-back of a crash-matrix
// case (a killed writer's files, three documents): the files placed, the
// database opened, check.Take, closed. Each iteration does it through
// Open (what the snapshot used) and through OpenForCheck (what it uses),
// one after the other, and reports each one's CPU time per snapshot
// (the process's, clock_gettime): side by side on a shared machine.
func BenchmarkCaseSnapshot(b *testing.B) {
	files := crashImage(b, 3)
	openers := []struct {
		name string
		open func(string, Options) (reference.Stores, error)
	}{{"open", Open}, {"open-for-check", OpenForCheck}}
	cpu := make([]time.Duration, len(openers))
	b.ReportAllocs()
	for range b.N {
		for i, o := range openers {
			path := placeImage(b, files, true)
			began := processCPU(b)
			st, err := o.open(path, Options{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := check.Take(context.Background(), st, "sp", nil, nil, nil); err != nil {
				b.Fatal(err)
			}
			if err := st.Close(); err != nil {
				b.Fatal(err)
			}
			cpu[i] += processCPU(b) - began
		}
	}
	for i, o := range openers {
		b.ReportMetric(float64(cpu[i].Microseconds())/float64(b.N), o.name+"-cpu-us/op")
	}
}

// processCPU is the CPU time this process has used.
func processCPU(b *testing.B) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ts.Nano())
}
