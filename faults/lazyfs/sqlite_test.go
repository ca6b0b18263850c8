package lazyfs

import (
	"database/sql"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// sqliteRows is how many transactions the helper commits.
const sqliteRows = 20

func sqliteDSN(path, sync string) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+sync+")")
	q.Add("_pragma", "busy_timeout(10000)")
	return "file:" + path + "?" + q.Encode()
}

// sqliteChild commits sqliteRows transactions with the given synchronous
// setting, says so, and waits to be killed: a process that dies with its
// transactions committed and acknowledged.
func sqliteChild(arg string) int {
	path, sync, _ := strings.Cut(arg, ",")
	db, err := sql.Open("sqlite", sqliteDSN(path, sync))
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	for i := 0; i < sqliteRows; i++ {
		if _, err := db.Exec(`INSERT INTO t(v) VALUES (?)`, i); err != nil {
			fmt.Println("error:", err)
			return 1
		}
	}
	fmt.Println("committed " + strconv.Itoa(sqliteRows))
	select {}
}

// countAfterPowerLoss makes a database with a durable empty table on a
// lazy mount, lets a helper process commit sqliteRows transactions into
// it with synchronous=sync and die by SIGKILL, cuts the power, and counts
// the rows that survived.
func countAfterPowerLoss(t *testing.T, sync string, cut func(*FS) Loss) int {
	f := mount(t)
	path := filepath.Join(f.Dir(), "db.sqlite")
	db, err := sql.Open("sqlite", sqliteDSN(path, "FULL"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t(v INTEGER)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cmd, line := startChild(t, "sqlite:"+path+","+sync)
	if line != fmt.Sprintf("committed %d", sqliteRows) {
		t.Fatalf("helper: %q", line)
	}
	kill9(t, cmd)
	loss := cut(f)
	t.Logf("synchronous=%s: the power loss threw away %+v", sync, loss)
	db, err = sql.Open("sqlite", sqliteDSN(path, "FULL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM t`).Scan(&n); err != nil {
		t.Fatalf("synchronous=%s: after the power loss: %v", sync, err)
	}
	// What survives is whole: the database is intact and holds the first
	// n transactions, in order.
	var ok string
	if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&ok); err != nil || ok != "ok" {
		t.Errorf("synchronous=%s: integrity check after the power loss: %q %v", sync, ok, err)
	}
	var prefix int
	if err := db.QueryRow(`SELECT count(*) FROM t WHERE v < ?`, n).Scan(&prefix); err != nil || prefix != n {
		t.Errorf("synchronous=%s: the %d rows that survived are not the first %d transactions (%d are) %v", sync, n, n, prefix, err)
	}
	return n
}

// The proof that the file system is lazy enough: SQLite without fsyncs
// loses transactions it acknowledged, SQLite with them keeps every one.
func TestSQLiteOffAndNormalLoseCommitsFullKeepsThem(t *testing.T) {
	if n := countAfterPowerLoss(t, "OFF", (*FS).PowerLoss); n >= sqliteRows {
		t.Errorf("synchronous=OFF: %d of %d committed rows survived the power loss; the file system kept writes that were never synced", n, sqliteRows)
	}
	// WAL with synchronous=NORMAL syncs the WAL only at a checkpoint: the
	// transactions since the last one are lost (SQLite documents it).
	if n := countAfterPowerLoss(t, "NORMAL", (*FS).PowerLoss); n >= sqliteRows {
		t.Errorf("synchronous=NORMAL: %d of %d committed rows survived the power loss; the WAL was never synced, so the file system kept unsynced writes", n, sqliteRows)
	} else {
		t.Logf("synchronous=NORMAL: %d of %d committed rows survived", n, sqliteRows)
	}
	if n := countAfterPowerLoss(t, "FULL", (*FS).PowerLoss); n != sqliteRows {
		t.Errorf("synchronous=FULL: %d of %d committed rows survived the power loss, want all", n, sqliteRows)
	}
}

// SQLite claims to survive torn writes (its WAL frames carry checksums):
// with synchronous=FULL every acknowledged transaction survives a power
// loss that keeps a random part of what was not synced; with NORMAL, whose
// WAL frames are all un-synced and so torn, what survives is an intact
// database holding a prefix of the transactions (countAfterPowerLoss
// checks both).
func TestSQLiteSurvivesTornWrites(t *testing.T) {
	for seed := int64(1); seed <= 3; seed++ {
		torn := func(f *FS) Loss { return f.PowerLossTorn(seed) }
		if n := countAfterPowerLoss(t, "FULL", torn); n != sqliteRows {
			t.Errorf("synchronous=FULL, torn power loss (seed %d): %d of %d committed rows survived", seed, n, sqliteRows)
		}
		n := countAfterPowerLoss(t, "NORMAL", torn)
		t.Logf("synchronous=NORMAL, torn power loss (seed %d): %d of %d committed rows survived", seed, n, sqliteRows)
	}
}
