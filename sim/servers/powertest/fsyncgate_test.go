package powertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/crashmatrix/crashmatrix/faults/lazyfs"
	"github.com/crashmatrix/crashmatrix/sim/servers"
	"github.com/crashmatrix/crashmatrix/sim/servers/provision"
	"github.com/jackc/pgx/v5"
)

// fsyncgate, reproduced on the lazy file system: rows committed (their
// WAL synced), then a CHECKPOINT whose fsync of the table's file fails
// with EIO, the pages it had to write dropped as Linux drops them. With
// its defaults PostgreSQL PANICs there, replays its WAL from the last
// good checkpoint, and the rows survive the power cut that follows. With
// data_sync_retry=on it reports an ERROR and retries the fsync at the next
// checkpoint; that fsync "succeeds" (nothing is left to write), the
// checkpoint moves the redo point past the rows' WAL, and the power cut
// loses them: what PostgreSQL did before 2018. The error is armed by the
// test on the table's own file, where the fsync-error column, armed at a
// worker's window, meets PostgreSQL's WAL sync first
// (TestPostgresDataSyncRetryUnderFsyncError).
func TestPostgresFsyncgate(t *testing.T) {
	const rows = 1000
	for _, tc := range []struct {
		name string
		conf []string
		lost bool
	}{
		{"defaults", nil, false},
		{"data_sync_retry=on", []string{"data_sync_retry=on"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := start(t, provision.ContainerOptions{NoNeo4j: true, PostgresConfig: tc.conf})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			dsn := st.Env[servers.EnvPostgresDSN]
			pg := func(sql string, out ...any) error {
				c, err := pgx.Connect(ctx, dsn)
				if err != nil {
					return err
				}
				defer c.Close(ctx)
				if len(out) > 0 {
					return c.QueryRow(ctx, sql).Scan(out...)
				}
				_, err = c.Exec(ctx, sql)
				return err
			}
			must := func(sql string, out ...any) {
				t.Helper()
				if err := pg(sql, out...); err != nil {
					t.Fatalf("%s: %v", sql, err)
				}
			}
			mnt := st.DataMount("postgres")
			if mnt == nil {
				t.Fatal("no lazy mount holds PostgreSQL's data")
			}
			must("CREATE TABLE fsyncgate (n int)")
			must("CHECKPOINT")
			// The empty table's file and its name durable, as ext4's journal
			// makes a new file's name with its first fsync: PostgreSQL syncs
			// no directory for a new relation (its WAL replay creates the
			// file again), and the mount keeps the POSIX rule, under which
			// a power cut after the redo point moved on loses the name
			// itself (a first run lost the whole file so).
			mnt.SyncAll()
			var file string
			must("SELECT pg_relation_filepath('fsyncgate')", &file)
			must(fmt.Sprintf("INSERT INTO fsyncgate SELECT generate_series(1, %d)", rows))
			before := mnt.DiskStats()
			mnt.FailNextSyncOf(func(p string) bool { return p == "data/"+file })
			first := pg("CHECKPOINT")
			t.Logf("CHECKPOINT with the fsync of %s failing: %v", file, first)
			var again error
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
				if again = pg("CHECKPOINT"); again == nil {
					break
				}
			}
			if first == nil || again != nil {
				t.Fatalf("the CHECKPOINT whose fsync failed: %v, want an error; the next: %v, want none", first, again)
			}
			if st := mnt.DiskStats(); st.SyncErrors-before.SyncErrors != 1 || st.Dropped == before.Dropped {
				t.Fatalf("the fsync error did not act on %s: %+v", file, st)
			}
			if _, err := st.Faults.PowerLoss(ctx, lazyfs.Tear{}); err != nil {
				t.Fatalf("power loss: %v", err)
			}
			var n int
			if err := pg("SELECT count(*) FROM fsyncgate", &n); err != nil {
				t.Fatalf("after the power loss: %v", err)
			}
			for _, l := range strings.Split(pgLog(st), "\n") {
				if strings.Contains(l, "fsync") || strings.Contains(l, "PANIC") {
					t.Logf("PostgreSQL: %s", strings.TrimSpace(l))
				}
			}
			t.Logf("%s: %d of %d committed rows after the power loss", tc.name, n, rows)
			if lost := n != rows; lost != tc.lost {
				t.Fatalf("%s: %d of %d committed rows after the power loss; want them lost: %v", tc.name, n, rows, tc.lost)
			}
		})
	}
}
