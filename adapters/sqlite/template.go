package sqlite

import (
	_ "embed" // the migrated template database
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// templateDB is a database file at SchemaVersion with the whole schema
// and no rows, as migrate leaves a new file (journal mode WAL, written
// back into the file, no WAL beside it). Open copies it into place when
// the file does not exist yet, instead of running the schema's DDL in a
// write transaction: the first worker process of every crash-matrix case
// paid that (a profile of the embedded matrix put it at about a third of
// the SQLite open). The process that placed the copy then makes one
// small write (initWAL) before any store call, as the DDL's transaction
// did: the WAL's creation, its header's sync and the folder's sync stay
// out of the first store call, whose one durable step is its WAL sync
// (TestDurableProbeOfTheEmbeddedDefault). TestTemplateIsTheMigratedSchema checks it against
// what migrate creates and rewrites it with -update-template.
//
//go:embed template.db
var templateDB []byte

// SchemaEnv, set to "ddl" in the environment, makes Open create a new
// database by running the schema's DDL rather than copying the template
// (bench measures the one next to the other); unset or "template" copies.
const SchemaEnv = "CRASHMATRIX_SQLITE_SCHEMA"

// useTemplate says whether Open copies the template into a new file.
func useTemplate() (bool, error) {
	switch v := os.Getenv(SchemaEnv); v {
	case "", "template":
		return true, nil
	case "ddl":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: want \"template\" (the default: a new database is a copy of the migrated template) or \"ddl\" (the schema's statements run in it)", SchemaEnv, v)
	}
}

// placeTemplate puts a copy of the template at path when nothing is
// there: written and synced under a temporary name in the same folder,
// then linked to path (a link never replaces a file, so a process that
// got there first keeps its database, rows and all) and the folder
// synced, so that a power loss leaves either no file or the whole
// template. Where the file system cannot link, it does nothing: migrate
// then runs the DDL as before. It says whether it placed the copy.
func placeTemplate(path string) (bool, error) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return false, nil // there, or an error the open reports
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, ".template-*.db")
	if err != nil {
		return false, fmt.Errorf("sqlite template: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(templateDB)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("sqlite template: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		var le *os.LinkError
		if errors.As(err, &le) && (errors.Is(le.Err, fs.ErrExist) || errors.Is(le.Err, syscall.EPERM) || errors.Is(le.Err, syscall.ENOTSUP) || errors.Is(le.Err, syscall.ENOSYS)) {
			return false, nil // another process's file, or no links here: migrate
		}
		return false, fmt.Errorf("sqlite template: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return false, fmt.Errorf("sqlite template: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("sqlite template: sync %s: %w", dir, err)
	}
	return true, nil
}

// initWAL is the write a new database's first open makes: it creates the
// WAL and syncs its header and the folder, as the schema's DDL did.
const initWAL = `PRAGMA user_version = 0`
