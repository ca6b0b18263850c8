package sqlite

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/crashmatrix/crashmatrix/reference"
)

// OpenForCheck opens the database file at path only to read it back (the
// crash matrix's check of a case, after its processes have ended): one
// read-only connection (SQLite's mode=ro) with a busy timeout and nothing
// else. It reads what a restart would: a read-only connection still
// reads the WAL's committed frames, rebuilding the WAL index from the
// WAL when it must, as any connection does. What Open adds and a reader
// does not need is left out: the journal-mode, synchronous, cache and
// foreign-key pragmas (each a statement to prepare), the migration's
// write transaction and, as a read-only connection never writes the
// file, the checkpoint of the WAL into the database that the last
// connection to close makes. The stores' writes fail (SQLITE_READONLY).
//
// A file that is not there yet, or not at SchemaVersion, is opened with
// Open and opts instead, as before (created from the template, or
// migrated), so that the reader sees what a restart would there too.
func OpenForCheck(path string, opts Options) (reference.Stores, error) {
	if strings.TrimSpace(path) == "" || strings.ContainsRune(path, '?') {
		return reference.Stores{}, fmt.Errorf("%w: sqlite path %q", reference.ErrInvalidArgument, path)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return Open(path, opts)
	}
	dsn, err := readOnlyDSN(path)
	if err != nil {
		return reference.Stores{}, err
	}
	d, err := connect(path, dsn, false)
	if err != nil {
		return reference.Stores{}, err
	}
	d.opts = opts
	if !d.schemaCurrent(context.Background()) {
		d.close()
		return Open(path, opts)
	}
	return d.stores(), nil
}

// readOnlyDSN is the file URI of a read-only connection to path: mode=ro
// (SQLite's own parameter, which the driver passes on only in a "file:"
// name) and the busy timeout every connection gets.
func readOnlyDSN(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite path %q: %w", path, err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeoutMillis))
	return "file:" + (&url.URL{Path: abs}).EscapedPath() + "?" + q.Encode(), nil
}
