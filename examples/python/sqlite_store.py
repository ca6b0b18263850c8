"""System A of crashmatrix on sqlite3 (standard library only).

Every store interface of the reference (operations with their plans,
document states with their version history, the entity registry, the
graph, per-document leases) in one SQLite file in the case's data
directory, one IMMEDIATE transaction per operation, so several processes
may share the file.

    crashmatrix certify --store-cmd "python3 examples/python/sqlite_store.py"

--two-transactions is a deliberate defect: ops.create commits the
operation, then its plan in a second transaction, declaring the crash
window between them (pystore/afterOperationRow). The crash matrix catches it
(an operation without its plan, invariant I1). With --undeclared as well,
the store declares no window: the matrix's durable-step sweep finds the
gap from the store's own fsyncs on the case's lazy mount and catches it.
"""

import gc

# The process starts once per worker of every case: the cyclic collector's
# passes over the objects that importing creates, which are never garbage,
# are a sixth of that start. serve() turns it back on.
gc.disable()

import posix
import sys

from storeproto import StoreError, import_sqlite3, loads, serve
from storeproto import dumps as _dumps

# The C module behind sqlite3, without the package's datetime and
# collections imports nor functools (see import_sqlite3).
sqlite3 = import_sqlite3()

SCHEMA_VERSION = 1
# Version 2's table of plans (--v2), beside version 1's tables.
SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS plans (operation_id TEXT PRIMARY KEY, plan TEXT NOT NULL);
"""
# What version 2's migration copies from a version 1 file: every plan, or
# (--v2-drained-only, the defect) those of finished operations only.
MIGRATE_ALL = "INSERT OR IGNORE INTO plans(operation_id, plan) SELECT operation_id, plan FROM operations WHERE plan IS NOT NULL"
MIGRATE_DRAINED = MIGRATE_ALL + " AND (stage = 'COMPLETED' OR disposition <> '')"
SCHEMA = """
CREATE TABLE IF NOT EXISTS operations (
  operation_id TEXT PRIMARY KEY, space TEXT NOT NULL, stage TEXT NOT NULL, disposition TEXT NOT NULL,
  updated_at INTEGER NOT NULL, claim_holder TEXT NOT NULL DEFAULT '', claim_expires_at INTEGER NOT NULL DEFAULT 0,
  record TEXT NOT NULL, plan TEXT);
CREATE TABLE IF NOT EXISTS states (
  space TEXT NOT NULL, document_id TEXT NOT NULL, revision INTEGER NOT NULL, operation_id TEXT NOT NULL,
  status TEXT NOT NULL, record TEXT NOT NULL, PRIMARY KEY (space, document_id));
CREATE TABLE IF NOT EXISTS state_versions (
  space TEXT NOT NULL, document_id TEXT NOT NULL, revision INTEGER NOT NULL, operation_id TEXT NOT NULL,
  record TEXT NOT NULL, PRIMARY KEY (space, document_id, revision));
CREATE TABLE IF NOT EXISTS registry_names (
  space TEXT NOT NULL, type_key TEXT NOT NULL, name TEXT NOT NULL, node_id TEXT NOT NULL,
  PRIMARY KEY (space, type_key, name));
CREATE TABLE IF NOT EXISTS registry_entities (
  space TEXT NOT NULL, node_id TEXT NOT NULL, type TEXT NOT NULL, canonical_name TEXT NOT NULL,
  names TEXT NOT NULL, properties TEXT NOT NULL, PRIMARY KEY (space, node_id));
CREATE TABLE IF NOT EXISTS nodes (
  space TEXT NOT NULL, id TEXT NOT NULL, label TEXT NOT NULL, properties TEXT NOT NULL, PRIMARY KEY (space, id));
CREATE TABLE IF NOT EXISTS edges (
  space TEXT NOT NULL, source TEXT NOT NULL, type TEXT NOT NULL, target TEXT NOT NULL, rank INTEGER NOT NULL,
  properties TEXT NOT NULL, PRIMARY KEY (space, source, type, target, rank));
CREATE TABLE IF NOT EXISTS leases (
  space TEXT NOT NULL, document_id TEXT NOT NULL, holder TEXT NOT NULL, token INTEGER NOT NULL,
  expires_at INTEGER NOT NULL, PRIMARY KEY (space, document_id));
CREATE TABLE IF NOT EXISTS lease_tokens (
  space TEXT NOT NULL, document_id TEXT NOT NULL, token INTEGER NOT NULL, PRIMARY KEY (space, document_id));
"""

IDENTITY = ("operationId", "space", "documentId", "expectedRevision", "planFingerprint")
MUTABLE = ("stage", "updatedAt", "failureReason", "attempts", "disposition", "supersededBy")
ZERO = {"expectedRevision": 0, "updatedAt": 0, "attempts": 0, "claimExpiresAt": 0}


def field(rec, name):
    """A field of a record, absent meaning its zero value."""
    v = rec.get(name)
    if v is None:
        return ZERO.get(name, "")
    return v


def dumps(v):
    return _dumps(v, sort_keys=True)


# A new file is a copy of this one (what create_schema makes of an empty
# file: journal mode WAL, the tables, no rows, but user_version 0; written by
# `python3 sqlite_store.py --write-template FILE`, checked against the DDL
# by TestPythonExampleTemplateIsTheSchema) instead of running the DDL: ten
# statements parsed and written in a write transaction at every new case
# directory. PYSTORE_SCHEMA=ddl in the environment runs the DDL instead.
# Through posix rather than os (see storeproto).
_here = __file__ if __file__.startswith("/") else posix.getcwd() + "/" + __file__
TEMPLATE = _here.rpartition("/")[0] + "/pystore-template.db"
TEMPLATE_ENV = "PYSTORE_SCHEMA"
SCHEMA_FROM = posix.environ.get(TEMPLATE_ENV.encode(), b"template").decode()


def place_template(path):
    """Put a copy of TEMPLATE at path when nothing is there: written and
    synced under a temporary name in the same folder, linked to path (a
    link never replaces a file: a process that got there first keeps its
    database) and the folder synced, so that a power loss leaves no file
    or the whole template. Says whether it placed it; where the folder
    cannot link, or there is no template beside this file (the store
    copied without it), places nothing (the DDL runs)."""
    try:
        posix.lstat(path)
        return False
    except FileNotFoundError:
        pass
    try:
        with open(TEMPLATE, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return False
    tmp = "%s.template-%d" % (path, posix.getpid())
    fd = posix.open(tmp, posix.O_WRONLY | posix.O_CREAT | posix.O_TRUNC, 0o644)
    try:
        while data:
            data = data[posix.write(fd, data):]
        posix.fsync(fd)
    finally:
        posix.close(fd)
    try:
        posix.link(tmp, path)
    except OSError:  # another process's file, or no links here
        return False
    finally:
        posix.unlink(tmp)
    fd = posix.open(path.rpartition("/")[0] or ".", posix.O_RDONLY)
    try:
        posix.fsync(fd)
    finally:
        posix.close(fd)
    return True


def write_template(path):
    """The template: what Store makes of an empty folder by the DDL, its
    WAL folded back into the file by the close."""
    import os
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        Store(d, None, False, schema_from="ddl").close()
        db = sqlite3.connect(os.path.join(d, "pystore.db"), isolation_level=None)
        db.execute("PRAGMA user_version=0")  # the opens' create_schema marks it
        db.close()
        os.replace(os.path.join(d, "pystore.db"), path)


class Store:
    def __init__(self, directory, conv, two_transactions, declared=True, migrate=None, schema_from=None):
        self.conv = conv
        self.two_transactions = two_transactions
        self.declared = declared
        # migrate is version 2's migration (--v2), None for version 1.
        self.v2 = migrate is not None
        path = directory + "/pystore.db"
        # schema_from: "template" or "ddl"; None, $PYSTORE_SCHEMA's (template by default).
        if (schema_from or SCHEMA_FROM) == "template":
            place_template(path)
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA synchronous=FULL")
        # Every worker starts a store process on the same file: the first
        # creates the tables and marks the file (user_version); the others
        # see the mark and take no write lock at start-up. WAL mode, once
        # set, stays with the file. Version 1 leaves a file version 2 has
        # migrated as it is.
        version = self.one("PRAGMA user_version")[0]
        if version < SCHEMA_VERSION:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.tx(self.create_schema)
        if self.v2 and version < 2:
            self.db.execute("PRAGMA journal_mode=WAL")
            self.tx(lambda: self.migrate(migrate))

    def close(self):
        self.db.close()

    def create_schema(self):
        if self.one("PRAGMA user_version")[0] >= SCHEMA_VERSION:
            return  # another process did, after this one looked
        # A copy of the template has the tables at user_version 0: the
        # mark alone is written, which creates the WAL (and syncs its
        # header) in this open, as the DDL's transaction does, and every
        # process that opens the file before the mark waits for it here:
        # the first store call's one durable step stays its commit.
        if not self.one("SELECT 1 FROM sqlite_master WHERE type='table' AND name='operations'"):
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
        self.db.execute("PRAGMA user_version=%d" % SCHEMA_VERSION)

    def migrate(self, copy):
        """Version 2's migration, once per file: the plans table, the
        plans of version 1's operations copied into it (copy)."""
        version = self.one("PRAGMA user_version")[0]
        if version >= 2:
            return  # another process did, after this one looked
        if version < SCHEMA_VERSION:
            self.create_schema()
        self.db.execute(SCHEMA_V2)
        self.db.execute(copy)
        self.db.execute("PRAGMA user_version=2")

    def tx(self, fn):
        """Run fn in one IMMEDIATE transaction. A failure before COMMIT is
        definite (rolled back); a failure of COMMIT itself is not."""
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as e:
            raise StoreError("unavailable", "begin: " + str(e))
        try:
            result = fn()
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        try:
            self.db.execute("COMMIT")
        except sqlite3.Error as e:
            raise StoreError("unavailable", "commit: " + str(e), definite=False)
        return result

    def read(self, fn):
        """Run fn on one snapshot (a deferred read transaction)."""
        self.db.execute("BEGIN")
        try:
            return fn()
        finally:
            self.db.execute("COMMIT")

    def one(self, sql, *args):
        return self.db.execute(sql, args).fetchone()

    def all(self, sql, *args):
        return self.db.execute(sql, args).fetchall()


# --- operations -------------------------------------------------------------

def ops_create(s, a):
    op, plan = a["operation"], a["plan"]

    def insert(with_plan):
        if s.one("SELECT 1 FROM operations WHERE operation_id=?", op["operationId"]):
            return False
        s.db.execute("INSERT INTO operations(operation_id, space, stage, disposition, updated_at, record, plan) VALUES (?,?,?,?,?,?,?)",
                     (op["operationId"], op["space"], op["stage"], field(op, "disposition"), field(op, "updatedAt"), dumps(op),
                      plan if with_plan else None))
        if s.v2 and with_plan:
            # Version 2 reads the plans table only; the column keeps a
            # copy for the processes of version 1 a rolling deploy leaves.
            s.db.execute("INSERT INTO plans(operation_id, plan) VALUES (?,?)", (op["operationId"], plan))
        return True

    if not s.two_transactions:
        return {"created": s.tx(lambda: insert(True))}
    # The defect: the operation row commits first, its plan later.
    if not s.tx(lambda: insert(False)):
        return {"created": False}
    if s.declared:
        s.conv.at("pystore/afterOperationRow")
    s.tx(lambda: s.db.execute("UPDATE operations SET plan=? WHERE operation_id=?", (plan, op["operationId"])))
    return {"created": True}


def load_op(s, operation_id):
    if s.v2:
        row = s.one("SELECT o.record, o.claim_holder, o.claim_expires_at, p.plan FROM operations o "
                    "LEFT JOIN plans p ON p.operation_id = o.operation_id WHERE o.operation_id=?", operation_id)
    else:
        row = s.one("SELECT record, claim_holder, claim_expires_at, plan FROM operations WHERE operation_id=?", operation_id)
    if row is None:
        raise StoreError("not_found", "operation " + operation_id)
    rec = loads(row[0])
    rec.pop("claimHolder", None)
    rec.pop("claimExpiresAt", None)
    if row[1]:
        rec["claimHolder"], rec["claimExpiresAt"] = row[1], row[2]
    return rec, row[3]


def ops_get(s, a):
    return {"operation": load_op(s, a["operationId"])[0]}


def ops_get_plan(s, a):
    rec, plan = load_op(s, a["operationId"])
    return {"plan": plan or "", "fingerprint": field(rec, "planFingerprint")}


def ops_cas(s, a):
    expected, nxt = a["expected"], a["next"]

    def run():
        stored, _ = load_op(s, expected["operationId"])
        for f in IDENTITY + ("stage", "attempts", "disposition"):
            if field(stored, f) != field(expected, f):
                return False
        if field(nxt, "updatedAt") < field(stored, "updatedAt"):
            raise StoreError("time_backwards", "operation %s: updatedAt %d before %d" % (
                expected["operationId"], field(nxt, "updatedAt"), field(stored, "updatedAt")))
        for f in MUTABLE:
            stored[f] = field(nxt, f)
        s.db.execute("UPDATE operations SET stage=?, disposition=?, updated_at=?, record=? WHERE operation_id=?",
                     (stored["stage"], stored["disposition"], stored["updatedAt"], dumps(stored), expected["operationId"]))
        return True

    return {"swapped": s.tx(run)}


def ops_list_recoverable(s, a):
    rows = s.all("SELECT operation_id FROM operations WHERE stage <> 'COMPLETED' AND disposition = '' "
                 "ORDER BY updated_at, operation_id LIMIT ?", a["limit"])
    return {"operations": [load_op(s, r[0])[0] for r in rows]}


def ops_list(s, a):
    return {"operations": [load_op(s, r[0])[0] for r in s.all("SELECT operation_id FROM operations ORDER BY operation_id")]}


def ops_claim(s, a):
    def run():
        row = s.one("SELECT claim_holder, claim_expires_at FROM operations WHERE operation_id=?", a["operationId"])
        if row is None:
            raise StoreError("not_found", "operation " + a["operationId"])
        if row[0] and row[0] != a["holder"] and row[1] > a["now"]:
            return False
        s.db.execute("UPDATE operations SET claim_holder=?, claim_expires_at=? WHERE operation_id=?",
                     (a["holder"], a["now"] + a["ttlMillis"], a["operationId"]))
        return True

    return {"claimed": s.tx(run)}


def ops_release_claim(s, a):
    def run():
        row = s.one("SELECT claim_holder FROM operations WHERE operation_id=?", a["operationId"])
        if row is None:
            raise StoreError("not_found", "operation " + a["operationId"])
        if not a["holder"].strip() or row[0] != a["holder"]:
            return False
        s.db.execute("UPDATE operations SET claim_holder='', claim_expires_at=0 WHERE operation_id=?", (a["operationId"],))
        return True

    return {"released": s.tx(run)}


# --- document states --------------------------------------------------------

def current(s, space, doc):
    row = s.one("SELECT record FROM states WHERE space=? AND document_id=?", space, doc)
    return loads(row[0]) if row else None


def states_find_current(s, a):
    return {"state": current(s, a["space"], a["documentId"])}


def states_find_by_operation(s, a):
    cur = current(s, a["space"], a["documentId"])
    if cur is not None and cur.get("operationId") == a["operationId"]:
        return {"state": cur}
    row = s.one("SELECT record FROM state_versions WHERE space=? AND document_id=? AND operation_id=? ORDER BY revision DESC LIMIT 1",
                a["space"], a["documentId"], a["operationId"])
    return {"state": loads(row[0]) if row else None}


def states_cas(s, a):
    nxt = a["next"]

    def run():
        row = s.one("SELECT revision FROM states WHERE space=? AND document_id=?", nxt["space"], nxt["documentId"])
        if (row[0] if row else 0) != a["expected"]:
            return False
        s.db.execute("INSERT INTO states(space, document_id, revision, operation_id, status, record) VALUES (?,?,?,?,?,?) "
                     "ON CONFLICT(space, document_id) DO UPDATE SET revision=excluded.revision, operation_id=excluded.operation_id, "
                     "status=excluded.status, record=excluded.record",
                     (nxt["space"], nxt["documentId"], nxt["revision"], field(nxt, "operationId"), field(nxt, "status"), dumps(nxt)))
        return True

    return {"swapped": s.tx(run)}


def states_remove(s, a):
    def run():
        cur = s.db.execute("DELETE FROM states WHERE space=? AND document_id=? AND revision=?", (a["space"], a["documentId"], a["revision"]))
        return cur.rowcount == 1

    return {"removed": s.tx(run)}


def states_record_version(s, a):
    st = a["state"]
    s.tx(lambda: s.db.execute("INSERT INTO state_versions(space, document_id, revision, operation_id, record) VALUES (?,?,?,?,?) "
                              "ON CONFLICT DO NOTHING",
                              (st["space"], st["documentId"], st["revision"], field(st, "operationId"), dumps(st))))
    return {}


def states_versions(s, a):
    rows = s.all("SELECT record FROM state_versions WHERE space=? AND document_id=? ORDER BY revision", a["space"], a["documentId"])
    return {"states": [loads(r[0]) for r in rows]}


def states_list(s, a):
    rows = s.all("SELECT record FROM states WHERE space=? ORDER BY document_id", a["space"])
    return {"states": [loads(r[0]) for r in rows]}


def states_is_referenced(s, a):
    edge = a["edge"]
    want = (edge["source"], edge["type"], edge["target"], edge.get("rank", 0))
    for (doc, record) in s.all("SELECT document_id, record FROM states WHERE space=? AND status='ACTIVE'", a["space"]):
        if a["documentId"] and doc == a["documentId"]:
            continue
        for k in loads(record).get("factSources") or []:
            if (k["source"], k["type"], k["target"], k.get("rank", 0)) == want:
                return {"referenced": True}
    return {"referenced": False}


# --- registry ----------------------------------------------------------------

def entity(s, space, node_id):
    row = s.one("SELECT type, canonical_name, names, properties FROM registry_entities WHERE space=? AND node_id=?", space, node_id)
    props = loads(row[3])
    e = {"space": space, "nodeId": node_id, "type": row[0], "canonicalName": row[1], "names": sorted(loads(row[2]))}
    if props:
        e["properties"] = props
    return e


def registry_find(s, a):
    ids = set()
    for n in a["names"]:
        row = s.one("SELECT node_id FROM registry_names WHERE space=? AND type_key=? AND name=?", a["space"], a["typeKey"], n)
        if row:
            ids.add(row[0])
    return {"entities": [entity(s, a["space"], i) for i in sorted(ids)]}


def registry_save(s, a):
    space, regs = a["space"], a["registrations"]

    def run():
        batch = {}
        for r in regs:
            for n in r["names"]:
                k = (r["typeKey"], n)
                row = s.one("SELECT node_id FROM registry_names WHERE space=? AND type_key=? AND name=?", space, r["typeKey"], n)
                if row and row[0] != r["nodeId"]:
                    raise StoreError("registry_conflict", "name %r (type %s) is bound to %s, not %s" % (n, r["typeKey"], row[0], r["nodeId"]))
                if batch.get(k, r["nodeId"]) != r["nodeId"]:
                    raise StoreError("registry_conflict", "name %r (type %s) is bound to %s and %s in one batch" % (n, r["typeKey"], batch[k], r["nodeId"]))
                batch[k] = r["nodeId"]
        for r in regs:
            row = s.one("SELECT names, properties FROM registry_entities WHERE space=? AND node_id=?", space, r["nodeId"])
            if row is None:
                names, props = set(), {}
                s.db.execute("INSERT INTO registry_entities(space, node_id, type, canonical_name, names, properties) VALUES (?,?,?,?,'[]','{}')",
                             (space, r["nodeId"], r["type"], r["canonicalName"]))
            else:
                names, props = set(loads(row[0])), loads(row[1])
            names.update(r["names"])
            props.update(r.get("properties") or {})
            s.db.execute("UPDATE registry_entities SET names=?, properties=? WHERE space=? AND node_id=?",
                         (dumps(sorted(names)), dumps(props), space, r["nodeId"]))
            for n in r["names"]:
                s.db.execute("INSERT INTO registry_names(space, type_key, name, node_id) VALUES (?,?,?,?) ON CONFLICT DO NOTHING",
                             (space, r["typeKey"], n, r["nodeId"]))

    s.tx(run)
    return {}


def registry_list(s, a):
    rows = s.all("SELECT node_id FROM registry_entities WHERE space=? ORDER BY node_id", a["space"])
    return {"entities": [entity(s, a["space"], r[0]) for r in rows]}


# --- graph -------------------------------------------------------------------

def graph_apply(s, a):
    space, m = a["space"], a["mutation"]

    def run():
        for nid in m.get("deleteNodes") or []:
            s.db.execute("DELETE FROM nodes WHERE space=? AND id=?", (space, nid))
            s.db.execute("DELETE FROM edges WHERE space=? AND (source=? OR target=?)", (space, nid, nid))
        for k in m.get("deleteEdges") or []:
            s.db.execute("DELETE FROM edges WHERE space=? AND source=? AND type=? AND target=? AND rank=?",
                         (space, k["source"], k["type"], k["target"], k.get("rank", 0)))
        for n in m.get("upsertNodes") or []:
            row = s.one("SELECT properties FROM nodes WHERE space=? AND id=?", space, n["id"])
            props = loads(row[0]) if row else {}
            props.update(n.get("properties") or {})
            if row:
                s.db.execute("UPDATE nodes SET properties=? WHERE space=? AND id=?", (dumps(props), space, n["id"]))
            else:
                s.db.execute("INSERT INTO nodes(space, id, label, properties) VALUES (?,?,?,?)", (space, n["id"], n.get("label", ""), dumps(props)))
        for e in m.get("upsertEdges") or []:
            k = e["key"]
            for end in (k["source"], k["target"]):
                if not s.one("SELECT 1 FROM nodes WHERE space=? AND id=?", space, end):
                    raise StoreError("missing_endpoint", "space %s: edge %s-%s->%s: node %s does not exist" % (space, k["source"], k["type"], k["target"], end))
        for e in m.get("upsertEdges") or []:
            k = e["key"]
            key = (space, k["source"], k["type"], k["target"], k.get("rank", 0))
            row = s.one("SELECT properties FROM edges WHERE space=? AND source=? AND type=? AND target=? AND rank=?", *key)
            props = loads(row[0]) if row else {}
            props.update(e.get("properties") or {})
            if row:
                s.db.execute("UPDATE edges SET properties=? WHERE space=? AND source=? AND type=? AND target=? AND rank=?", (dumps(props),) + key)
            else:
                s.db.execute("INSERT INTO edges(space, source, type, target, rank, properties) VALUES (?,?,?,?,?,?)", key + (dumps(props),))

    s.tx(run)
    return {}


def graph_read(s, a):
    nodes = [{"id": r[0], "label": r[1], "properties": loads(r[2])}
             for r in s.all("SELECT id, label, properties FROM nodes WHERE space=?", a["space"])]
    edges = [{"key": {"source": r[0], "type": r[1], "target": r[2], "rank": r[3]}, "properties": loads(r[4])}
             for r in s.all("SELECT source, type, target, rank, properties FROM edges WHERE space=?", a["space"])]
    return {"nodes": nodes, "edges": edges}


# --- leases ------------------------------------------------------------------

def lease_of(row, space, doc):
    return {"space": space, "documentId": doc, "holder": row[0], "token": row[1], "expiresAt": row[2]}


def locks_try(s, a):
    space, doc, holder, now, ttl = a["space"], a["documentId"], a["holder"], a["now"], a["ttlMillis"]

    def run():
        row = s.one("SELECT holder, token, expires_at FROM leases WHERE space=? AND document_id=?", space, doc)
        if row and row[2] > now:
            if row[0] != holder:
                return {"lease": lease_of(row, space, doc), "acquired": False}
            s.db.execute("UPDATE leases SET expires_at=? WHERE space=? AND document_id=?", (now + ttl, space, doc))
            return {"lease": lease_of((row[0], row[1], now + ttl), space, doc), "acquired": True}
        t = s.one("SELECT token FROM lease_tokens WHERE space=? AND document_id=?", space, doc)
        token = (t[0] if t else 0) + 1
        s.db.execute("INSERT INTO lease_tokens(space, document_id, token) VALUES (?,?,?) ON CONFLICT(space, document_id) DO UPDATE SET token=excluded.token",
                     (space, doc, token))
        s.db.execute("INSERT INTO leases(space, document_id, holder, token, expires_at) VALUES (?,?,?,?,?) "
                     "ON CONFLICT(space, document_id) DO UPDATE SET holder=excluded.holder, token=excluded.token, expires_at=excluded.expires_at",
                     (space, doc, holder, token, now + ttl))
        return {"lease": lease_of((holder, token, now + ttl), space, doc), "acquired": True}

    return s.tx(run)


def locks_renew(s, a):
    l, now, ttl = a["lease"], a["now"], a["ttlMillis"]

    def run():
        row = s.one("SELECT holder, token, expires_at FROM leases WHERE space=? AND document_id=?", l["space"], l["documentId"])
        if row is None:
            raise StoreError("lease_lost", "no lease is held")
        if row[0] != l["holder"] or row[1] != l["token"]:
            raise StoreError("lease_lost", "held by %s with token %d" % (row[0], row[1]))
        if row[2] <= now:
            raise StoreError("lease_lost", "expired at %d (now %d)" % (row[2], now))
        s.db.execute("UPDATE leases SET expires_at=? WHERE space=? AND document_id=?", (now + ttl, l["space"], l["documentId"]))
        return {"lease": lease_of((row[0], row[1], now + ttl), l["space"], l["documentId"])}

    return s.tx(run)


def locks_release(s, a):
    l = a["lease"]

    def run():
        row = s.one("SELECT holder, token FROM leases WHERE space=? AND document_id=?", l["space"], l["documentId"])
        if row is None:
            raise StoreError("lease_lost", "no lease is held")
        if row[0] != l["holder"] or row[1] != l["token"]:
            raise StoreError("lease_lost", "held by %s with token %d" % (row[0], row[1]))
        s.db.execute("DELETE FROM leases WHERE space=? AND document_id=?", (l["space"], l["documentId"]))

    s.tx(run)
    return {}


HANDLERS = {
    "ops.create": ops_create, "ops.get": ops_get, "ops.getPlan": ops_get_plan, "ops.cas": ops_cas,
    "ops.listRecoverable": ops_list_recoverable, "ops.list": ops_list, "ops.claim": ops_claim, "ops.releaseClaim": ops_release_claim,
    "states.findCurrent": states_find_current, "states.findByOperationId": states_find_by_operation, "states.cas": states_cas,
    "states.remove": states_remove, "states.recordVersion": states_record_version, "states.versions": states_versions,
    "states.list": states_list, "states.isReferenced": states_is_referenced,
    "registry.findMatches": registry_find, "registry.saveAll": registry_save, "registry.list": registry_list,
    "graph.apply": graph_apply, "graph.readRecords": graph_read,
    "locks.tryAcquire": locks_try, "locks.renew": locks_renew, "locks.release": locks_release,
}

# The reads that make more than one statement run on one snapshot (a
# deferred read transaction, Store.read); the others make one statement,
# which SQLite runs on a snapshot of its own, without the BEGIN and COMMIT
# (two statements of three: a tenth of the SQLite time of a System A
# matrix round, where two reads of three make one statement).
READS = ["ops.listRecoverable", "ops.list", "states.findByOperationId",
         "registry.findMatches", "registry.list", "graph.readRecords"]
ONE_STATEMENT_READS = ["ops.get", "ops.getPlan", "states.findCurrent", "states.versions", "states.list", "states.isReferenced"]
for _op in READS:
    HANDLERS[_op] = (lambda f: lambda s, a: s.read(lambda: f(s, a)))(HANDLERS[_op])

def main():
    args = sys.argv[1:]
    if args[:1] == ["--write-template"] and len(args) == 2:
        write_template(args[1])
        return
    if SCHEMA_FROM not in ("template", "ddl"):
        sys.exit("%s=%r: want template (the default: a new file is a copy of %s) or ddl (the schema's statements run in it)" % (
            TEMPLATE_ENV, SCHEMA_FROM, TEMPLATE))
    two = "--two-transactions" in args
    declared = "--undeclared" not in args
    migrate, version = None, ""
    if "--v2-drained-only" in args:
        migrate, version = MIGRATE_DRAINED, "-v2-drained-only"
    elif "--v2" in args:
        migrate, version = MIGRATE_ALL, "-v2"
    serve("pystore" + version + ("-two-transactions" if two else "") + ("" if declared else "-undeclared"),
          ["operations", "states", "registry", "graph", "locks"],
          lambda directory, mutant, conv: Store(directory, conv, two, declared, migrate), HANDLERS)


if __name__ == "__main__":
    main()
