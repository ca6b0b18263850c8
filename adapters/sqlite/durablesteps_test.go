package sqlite_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/crashmatrix/crashmatrix/adapters/sqlite"
	"github.com/crashmatrix/crashmatrix/internal/storetest"
)

// walCommits counts the commit frames of the current generation of a
// write-ahead log (frames whose salt matches the header's; a commit frame
// records the database size after the commit, 0 otherwise). Every
// transaction SQLite commits in WAL mode ends with one commit frame.
func walCommits(t *testing.T, path string) (commits int, salt uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 {
		return 0, 0
	}
	pageSize := int(binary.BigEndian.Uint32(b[8:12]))
	if pageSize == 1 {
		pageSize = 65536
	}
	s1, s2 := binary.BigEndian.Uint32(b[16:20]), binary.BigEndian.Uint32(b[20:24])
	for off := 32; off+24+pageSize <= len(b); off += 24 + pageSize {
		f := b[off : off+24]
		if binary.BigEndian.Uint32(f[8:12]) != s1 || binary.BigEndian.Uint32(f[12:16]) != s2 {
			break // a frame of an earlier generation: the log ends here
		}
		if binary.BigEndian.Uint32(f[4:8]) != 0 {
			commits++
		}
	}
	return commits, uint64(s1)<<32 | uint64(s2)
}

// Why the SQLite adapter declares no store windows: no method of its
// stores (System A's and System B's) takes two durable steps, counted as
// the commit frames a call adds to the databases' write-ahead logs.
func TestNoStoreMethodTakesTwoDurableSteps(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(filepath.Join(dir, "crashmatrix.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ps, err := sqlite.OpenPlanSave(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	salts := map[string]uint64{}
	commits := func() int {
		wals, _ := filepath.Glob(filepath.Join(dir, "*-wal"))
		n := 0
		for _, w := range wals {
			c, salt := walCommits(t, w)
			if old, ok := salts[w]; ok && old != salt && old != 0 {
				t.Fatalf("%s was checkpointed and restarted during the run: commits cannot be counted", w)
			}
			salts[w] = salt
			n += c
		}
		return n
	}
	storetest.DurableSteps(t, st, ps, ps, commits)
	if len(salts) != 3 {
		t.Errorf("write-ahead logs %v, want the ingestion database's and System B's two (checkpoints, plans)", salts)
	}
}
