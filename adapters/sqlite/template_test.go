package sqlite

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/crashmatrix/crashmatrix/internal/storetest"
)

var updateTemplate = flag.Bool("update-template", false, "rewrite template.db from what the schema's DDL creates")

// schemaOf lists what a database file holds of the schema: every
// sqlite_master row (type, name, table, statement), the schema version
// and the pragmas a file keeps.
func schemaOf(t *testing.T, path string) []string {
	t.Helper()
	db := rawDB(t, path)
	defer db.Close()
	rows, err := db.Query(`SELECT type || ' ' || name || ' ' || tbl_name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`)
	storetest.Must(t, err)
	var out []string
	for rows.Next() {
		var s string
		storetest.Must(t, rows.Scan(&s))
		out = append(out, s)
	}
	storetest.Must(t, rows.Err())
	rows.Close()
	var version, rowsIn int64
	var journal string
	storetest.Must(t, db.QueryRow(`SELECT max(version), count(*) FROM schema_version`).Scan(&version, &rowsIn))
	storetest.Must(t, db.QueryRow(`PRAGMA journal_mode`).Scan(&journal))
	return append(out, "version "+strconv.FormatInt(version, 10), "schema_version rows "+strconv.FormatInt(rowsIn, 10), "journal_mode "+journal)
}

// ddlDatabase creates a database at path by running the schema's DDL (the
// template off), closed, its WAL folded back into the file.
func ddlDatabase(t *testing.T, path string) {
	t.Helper()
	t.Setenv(SchemaEnv, "ddl")
	s, err := Open(path, Options{})
	storetest.Must(t, err)
	storetest.Must(t, s.Close())
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatalf("%s-wal left after the last connection closed", path)
	}
}

// The embedded template is what migrate makes of a new file: the same
// tables, indexes and statements, the version and the journal mode; and
// Open copies it into a new file, where it works as a migrated one does.
func TestTemplateIsTheMigratedSchema(t *testing.T) {
	dir := t.TempDir()
	ddl := filepath.Join(dir, "ddl.db")
	ddlDatabase(t, ddl)
	if *updateTemplate {
		b, err := os.ReadFile(ddl)
		storetest.Must(t, err)
		storetest.Must(t, os.WriteFile("template.db", b, 0o644))
		templateDB = b
	}
	copied := filepath.Join(dir, "copied.db")
	t.Setenv(SchemaEnv, "")
	if placed, err := placeTemplate(copied); err != nil || !placed {
		t.Fatalf("placeTemplate on a new path: placed %v, %v", placed, err)
	}
	want, got := schemaOf(t, ddl), schemaOf(t, copied)
	if !slices.Equal(want, got) {
		t.Fatalf("template.db is not what the schema's DDL creates (go test -run TestTemplateIsTheMigratedSchema -update-template ./adapters/sqlite/ rewrites it):\ntemplate: %q\nDDL:      %q", got, want)
	}
	// Open on a new path copies the template (no leftover temporary
	// file), and a second Open leaves the file it finds alone.
	fresh := filepath.Join(dir, "fresh", "case.db")
	storetest.Must(t, os.MkdirAll(filepath.Dir(fresh), 0o755))
	s, err := Open(fresh, Options{})
	storetest.Must(t, err)
	if _, err := s.Ops.Get(t.Context(), "no-such-operation"); err == nil {
		t.Fatal("Get of an unknown operation on the copied template found one")
	}
	storetest.Must(t, s.Close())
	b, err := os.ReadFile(fresh)
	storetest.Must(t, err)
	if len(b) < len(templateDB) {
		t.Fatalf("the new database holds %d bytes, the template %d", len(b), len(templateDB))
	}
	entries, err := os.ReadDir(filepath.Dir(fresh))
	storetest.Must(t, err)
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".db" && e.Name() != "case.db" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if !slices.Equal(schemaOf(t, fresh), want) {
		t.Fatalf("a database Open copied from the template: %q, want %q", schemaOf(t, fresh), want)
	}
	before := []byte("not a database")
	keep := filepath.Join(dir, "keep.db")
	storetest.Must(t, os.WriteFile(keep, before, 0o644))
	if placed, err := placeTemplate(keep); err != nil || placed {
		t.Fatalf("placeTemplate on a file that is there: placed %v, %v", placed, err)
	}
	if b, _ := os.ReadFile(keep); string(b) != string(before) {
		t.Fatal("placeTemplate replaced a file that was there")
	}
}

// A bad value of the environment variable is an error, not a silent
// default.
func TestSchemaEnvRejectsOtherValues(t *testing.T) {
	t.Setenv(SchemaEnv, "fast")
	if _, err := Open(filepath.Join(t.TempDir(), "x.db"), Options{}); err == nil {
		t.Fatalf("%s=fast opened a database", SchemaEnv)
	}
}
