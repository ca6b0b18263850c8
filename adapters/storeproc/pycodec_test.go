package storeproc_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The Python example's JSON codec (storeproto.py) goes through the C
// module _json for its start-up time, and falls back to the json package
// where _json is missing. Both must write what json.dumps(v,
// separators=(",", ":")) writes and read what json.loads reads; the
// fallback is forced by blocking _json before the import.
func TestPythonExampleCodecMatchesTheJSONPackage(t *testing.T) {
	const check = `
import sys
blocked = sys.argv[1] == "blocked"
if blocked:
    sys.modules["_json"] = None
import storeproto
assert ("json" in sys.modules) == blocked, "the json package imported: %s, want %s" % (not blocked, blocked)
import json
for v in [{"id": 7, "op": "ops.cas", "args": {"b": [1, -2.5, 1e300, "\u00e9\n\"\\", None, True, False], "a": {}}},
          [], "x", 0, {"nested": {"deep": [[{}]]}}]:
    for sort in (False, True):
        got, want = storeproto.dumps(v, sort), json.dumps(v, separators=(",", ":"), sort_keys=sort)
        assert got == want, (got, want)
    assert storeproto.loads(" " + want + "\n") == json.loads(want)
try:
    storeproto.loads('{"a":1} x')
except ValueError:
    pass
else:
    raise AssertionError("trailing data accepted")
print("ok")
`
	runPythonCheck(t, "codec", check, "c", "blocked")
}

// The Python example imports _sqlite3 with a stand-in for functools
// (storeproto.import_sqlite3): the stand-in must serve as the statement
// cache, evicting past its size, and be gone afterwards; where functools
// is imported already, the real one serves.
func TestPythonExampleSQLiteImportWithoutFunctools(t *testing.T) {
	const check = `
import sys
first = sys.argv[1] == "functools-first"
if first:
    import functools
import storeproto
m = storeproto.import_sqlite3()
assert m.__name__ == "_sqlite3", m.__name__
assert ("functools" in sys.modules) == first, "functools imported: %s" % ("functools" in sys.modules)
db = m.connect(":memory:", cached_statements=4)
db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
for round in range(3):
    for i in range(10):  # ten statements through a cache of four
        db.execute("INSERT OR REPLACE INTO t (k, v) VALUES (?, ?) -- %d" % i, (i, "v%d.%d" % (round, i)))
        assert db.execute("SELECT v FROM t WHERE k = ? -- %d" % i, (i,)).fetchone() == ("v%d.%d" % (round, i),)
assert db.execute("SELECT count(*) FROM t").fetchone() == (10,)
import functools
assert hasattr(functools, "reduce"), "the stand-in stayed"
print("ok")
`
	runPythonCheck(t, "import_sqlite3", check, "stand-in", "functools-first")
}

// runPythonCheck runs the Python program check in the examples' folder
// once per mode (its argument), and fails unless it prints ok.
func runPythonCheck(t *testing.T, what, check string, modes ...string) {
	t.Helper()
	for _, mode := range modes {
		argv := strings.Fields(python(t, ""))
		cmd := exec.Command(argv[0], append(argv[1:], "-c", check, mode)...)
		cmd.Dir = examples(t)
		// The checks' tempfile folders go where the test removes them.
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "ok" {
			t.Errorf("%s %s: %v\n%s", what, mode, err, out)
		}
	}
}

// The Python example's new database is a copy of pystore-template.db
// (sqlite_store.place_template): the template must be what the schema's
// DDL makes of an empty folder but with user_version 0 (rewrite it with
// `python3 sqlite_store.py --write-template pystore-template.db`); a copy
// placed by an open leaves no temporary file, is marked and has its WAL
// made by the open (the first store call's one durable step stays its
// commit), is what the DDL makes, and never replaces a file there; a
// store copied without the template runs the DDL.
func TestPythonExampleTemplateIsTheSchema(t *testing.T) {
	const check = `
import os, sys, tempfile
import sqlite_store as s
def describe(path):
    db = s.sqlite3.connect(path)
    try:
        return (db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall(),
                [db.execute("PRAGMA " + p).fetchone()[0] for p in ("user_version", "journal_mode", "page_size", "freelist_count")])
    finally:
        db.close()
d = tempfile.mkdtemp()
s.Store(d, None, False, schema_from="ddl").close()
fresh = os.path.join(d, "pystore.db")
tables, (version, mode, page, free) = describe(s.TEMPLATE)
assert version == 0, "the template's user_version is %d, want 0 (the opens mark it)" % version
if sys.argv[1] == "ddl":
    assert (tables, [1, mode, page, free]) == describe(fresh), "pystore-template.db is not what the DDL makes:\n%r\n%r" % (describe(s.TEMPLATE), describe(fresh))
else:
    case = os.path.join(d, "case")
    os.mkdir(case)
    schema, s.SCHEMA = s.SCHEMA, ""  # the tables come from the copy, or not at all
    st = s.Store(case, None, False, schema_from="template")
    assert sorted(os.listdir(case)) == ["pystore.db", "pystore.db-shm", "pystore.db-wal"], os.listdir(case)
    assert os.path.getsize(os.path.join(case, "pystore.db-wal")) > 0, "no WAL written by the open"
    st.tx(lambda: st.db.execute("INSERT INTO leases VALUES ('s', 'd', 'h', 1, 2)"))
    st.close()
    assert describe(os.path.join(case, "pystore.db")) == describe(fresh)
    s.Store(case, None, False).close()  # there already: kept, rows and all
    db = s.sqlite3.connect(os.path.join(case, "pystore.db"))
    assert db.execute("SELECT count(*) FROM leases").fetchone() == (1,), "the open replaced the file"
    # A store copied without its template (upgrade.txtar) runs the DDL.
    s.SCHEMA, s.TEMPLATE = schema, os.path.join(d, "no-template.db")
    other = os.path.join(d, "other")
    os.mkdir(other)
    s.Store(other, None, False, schema_from="template").close()
    assert describe(os.path.join(other, "pystore.db"))[0] == tables, "no tables without a template"
print("ok")
`
	runPythonCheck(t, "template", check, "ddl", "placed")
}

// The reads sqlite_store.py runs without a transaction of their own
// (ONE_STATEMENT_READS) must make one statement each: a second would read
// another snapshot than the first.
func TestPythonExampleOneStatementReads(t *testing.T) {
	const check = `
import os, sys, tempfile
import sqlite_store as s
from storeproto import StoreError
st = s.Store(tempfile.mkdtemp(), None, False)
class Counting:
    def __init__(self, db):
        self.db, self.n = db, 0
    def execute(self, *a):
        self.n += 1
        return self.db.execute(*a)
args = {"operationId": "op", "space": "sp", "documentId": "doc", "edge": {"source": "a", "type": "t", "target": "b"}}
st.tx(lambda: st.db.execute("INSERT INTO states VALUES ('sp', 'doc', 1, 'op', 'ACTIVE', '{\"factSources\": []}')"))
st.tx(lambda: st.db.execute("INSERT INTO states VALUES ('sp', 'doc2', 1, 'op', 'ACTIVE', '{\"factSources\": []}')"))
for op in s.ONE_STATEMENT_READS:
    st.db = Counting(st.db)
    try:
        s.HANDLERS[op](st, args)
    except StoreError:
        pass
    assert st.db.n == 1, "%s made %d statements" % (op, st.db.n)
    st.db = st.db.db
assert not set(s.ONE_STATEMENT_READS) & set(s.READS)
print("ok")
`
	runPythonCheck(t, "one-statement reads", check, "reads")
}
