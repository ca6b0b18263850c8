package catalogue_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/sim/catalogue"
)

// The shards of a matrix are disjoint, together they are the matrix, each
// keeps the matrix order, they differ in size by one case at most, and a
// case's shard does not depend on the order the cases came in.
func TestShardsSplitTheMatrixByCaseID(t *testing.T) {
	matrix := catalogue.Lease(250 * time.Millisecond).Matrix()
	ids := make([]string, len(matrix))
	for i, c := range matrix {
		ids[i] = c.ID
	}
	for _, n := range []int{1, 2, 3, 7, len(matrix)} {
		seen := map[string]int{}
		sizes := []int{}
		for i := 0; i < n; i++ {
			part := catalogue.Shard{Index: i, Count: n}.Select(matrix)
			sizes = append(sizes, len(part))
			last := -1
			for _, c := range part {
				if prev, dup := seen[c.ID]; dup {
					t.Fatalf("n=%d: case %s in shard %d and %d", n, c.ID, prev, i)
				}
				seen[c.ID] = i
				at := slices.Index(ids, c.ID)
				if at < last {
					t.Fatalf("n=%d shard %d: case %s out of matrix order", n, i, c.ID)
				}
				last = at
			}
		}
		if len(seen) != len(matrix) {
			t.Fatalf("n=%d: the shards hold %d of the matrix's %d cases", n, len(seen), len(matrix))
		}
		if slices.Max(sizes)-slices.Min(sizes) > 1 {
			t.Errorf("n=%d: shard sizes %v differ by more than one", n, sizes)
		}
		shuffled := slices.Clone(ids)
		rand.New(rand.NewPCG(1, uint64(n))).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for id, s := range catalogue.ShardOf(shuffled, n) {
			if seen[id] != s {
				t.Fatalf("n=%d: case %s is in shard %d, but in %d when the cases come in another order", n, id, seen[id], s)
			}
		}
	}
}

func TestParseShard(t *testing.T) {
	for in, want := range map[string]catalogue.Shard{"0/1": {0, 1}, "2/3": {2, 3}, " 1 / 4 ": {1, 4}} {
		got, err := catalogue.ParseShard(in)
		if err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "3", "3/3", "-1/3", "1/0", "a/3", "1/b", "1/3/4"} {
		if _, err := catalogue.ParseShard(in); err == nil {
			t.Errorf("ParseShard(%q) accepted", in)
		}
	}
}

// The fingerprint changes with the settings and the set of cases, not
// with the shard taken.
func TestMatrixFingerprint(t *testing.T) {
	matrix := catalogue.Lease(250 * time.Millisecond).Matrix()
	a := catalogue.NewMatrixID(catalogue.MatrixID{Backend: "sqlite", Seed: 1, Mode: "in-process"}, matrix)
	if a.Sum() != a.Fingerprint || len(a.Cases) != len(matrix) {
		t.Fatalf("fingerprint %s, sum %s, %d cases of %d", a.Fingerprint, a.Sum(), len(a.Cases), len(matrix))
	}
	for name, b := range map[string]catalogue.MatrixID{
		"backend": catalogue.NewMatrixID(catalogue.MatrixID{Backend: "memory", Seed: 1, Mode: "in-process"}, matrix),
		"seed":    catalogue.NewMatrixID(catalogue.MatrixID{Backend: "sqlite", Seed: 2, Mode: "in-process"}, matrix),
		"mode":    catalogue.NewMatrixID(catalogue.MatrixID{Backend: "sqlite", Seed: 1, Mode: "processes"}, matrix),
		"cases":   catalogue.NewMatrixID(catalogue.MatrixID{Backend: "sqlite", Seed: 1, Mode: "in-process"}, matrix[1:]),
	} {
		if b.Fingerprint == a.Fingerprint {
			t.Errorf("another %s, the same fingerprint %s", name, a.Fingerprint)
		}
	}
	if again := catalogue.NewMatrixID(catalogue.MatrixID{Backend: "sqlite", Seed: 1, Mode: "in-process"}, catalogue.Lease(250*time.Millisecond).Matrix()); again.Fingerprint != a.Fingerprint {
		t.Errorf("the same matrix built twice: fingerprints %s and %s", a.Fingerprint, again.Fingerprint)
	}
}
