package postgres

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
)

// releasedMigrations pins the text of every released migration: a
// database that applied version v never runs it again, so changing its
// statements (here or in the sqlcore tables it includes) would leave old
// and new databases with different schemas. Append a migration instead.
var releasedMigrations = map[int]string{
	1: "f642cef999406d91a1ad0ba930b4a918dd8b1db09e10fd50c7c36c85fcf3688d",
}

func TestReleasedMigrationsUnchanged(t *testing.T) {
	for _, m := range migrations {
		want, ok := releasedMigrations[m.version]
		if !ok {
			continue // not released yet
		}
		if got := fmt.Sprintf("%x", sha256.Sum256([]byte(strings.Join(m.stmts, "\n;\n")))); got != want {
			t.Errorf("migration %d changed (sha256 %s, released %s): add a migration instead", m.version, got, want)
		}
	}
	if _, ok := releasedMigrations[1]; !ok || migrations[0].version != 1 {
		t.Fatal("migration 1 is not pinned")
	}
}
