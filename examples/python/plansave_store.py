"""System B of crashmatrix: the plan store of the plan-save seed, behind
the store protocol (standard library only).

The workflow's checkpoints and the business plan table commit separately
(two SQLite files). The plan table is UNIQUE(owner, operation_id) and a save
is INSERT ... ON CONFLICT(owner, operation_id) DO NOTHING, then a SELECT of
the row, as the seed describes it: a save retried with the same
operation_id after a crash finds the first row (invariant I8).

    crashmatrix certify --store-cmd "python3 sqlite_store.py" --plansave-cmd "python3 plansave_store.py"

--no-unique drops the constraint (and so the ON CONFLICT clause, which
SQLite refuses without it) and reads back the row it just inserted: the
retried save inserts a second row, and the crash matrix catches it.

Each connection runs with PRAGMA synchronous=EXTRA, the one change from
the seed: with sqlite3's defaults a power loss right after a commit can
undo it (see SYNCHRONOUS below). --sqlite-defaults keeps the defaults,
and the power-loss column catches it (I8: the checkpoint gone).
"""

import gc

# The process starts once per worker of every case: the cyclic collector's
# passes over the objects that importing creates, which are never garbage,
# are a sixth of that start. serve() turns it back on.
gc.disable()

import json
import os
import sqlite3
import sys
from contextlib import closing

from storeproto import StoreError, serve

# A power loss right after a commit in SQLite's default journal mode
# (DELETE) can undo it: the commit deletes the rollback journal, and
# without synchronous=EXTRA nothing fsyncs the directory after that, so
# the journal comes back and the next open rolls the transaction back.
# crashmatrix's power-loss column found it here (the checkpoint written
# at planSaveBeforeApprove gone after the power loss, I8); SQLite's
# documentation says as much of FULL and EXTRA. --sqlite-defaults keeps
# the seed's plain defaults, to show it.
SYNCHRONOUS = "FULL" if "--sqlite-defaults" in sys.argv[1:] else "EXTRA"


def connect(path):
    connection = sqlite3.connect(path, timeout=30)
    connection.execute("PRAGMA synchronous=" + SYNCHRONOUS)
    return connection


class CheckpointStore:
    """The workflow's checkpointer: one row per thread, its own file."""

    def __init__(self, path):
        self.path = path
        with closing(connect(path)) as connection, connection:
            connection.execute("CREATE TABLE IF NOT EXISTS checkpoints (thread_id TEXT PRIMARY KEY, payload TEXT NOT NULL)")

    def load(self, thread_id):
        with closing(connect(self.path)) as connection, connection:
            row = connection.execute("SELECT payload FROM checkpoints WHERE thread_id=?", (thread_id,)).fetchone()
            return json.loads(row[0]) if row else None

    def put(self, checkpoint):
        with closing(connect(self.path)) as connection, connection:
            connection.execute("INSERT INTO checkpoints(thread_id, payload) VALUES (?, ?) "
                               "ON CONFLICT(thread_id) DO UPDATE SET payload=excluded.payload",
                               (checkpoint["threadId"], json.dumps(checkpoint)))


class PlanStore:
    """The seed's plan store."""

    def __init__(self, path, unique=True):
        self.path = path
        self.unique = unique
        constraint = ",\n                UNIQUE(owner, operation_id)" if unique else ""
        with closing(connect(path)) as connection, connection:
            connection.execute("""CREATE TABLE IF NOT EXISTS plans (
                id INTEGER PRIMARY KEY, owner TEXT NOT NULL, operation_id TEXT NOT NULL,
                question TEXT NOT NULL, minutes INTEGER NOT NULL""" + constraint + ")")

    def save(self, owner, operation_id, question, minutes):
        """A repeated save with the same operation id reads the first row."""
        insert = "INSERT INTO plans(owner,operation_id,question,minutes) VALUES (?,?,?,?)"
        select = "SELECT id,question,minutes FROM plans WHERE owner=? AND operation_id=?"
        if self.unique:
            insert += " ON CONFLICT(owner,operation_id) DO NOTHING"
        else:
            select += " ORDER BY id DESC LIMIT 1"  # the row just inserted
        with closing(connect(self.path)) as connection, connection:
            connection.execute(insert, (owner, operation_id, question, minutes))
            row = connection.execute(select, (owner, operation_id)).fetchone()
            if row[1:] != (question, minutes):
                raise ValueError("operation_id already used for another plan")
            return row[0]

    def list(self, owner):
        with closing(connect(self.path)) as connection, connection:
            connection.row_factory = sqlite3.Row
            return [dict(row) for row in connection.execute("SELECT * FROM plans WHERE owner=? ORDER BY id", (owner,))]


class Stores:
    def __init__(self, directory, unique):
        self.checkpoints = CheckpointStore(os.path.join(directory, "checkpoints.db"))
        self.plans = PlanStore(os.path.join(directory, "plans.db"), unique)


def plans_save(s, a):
    try:
        return {"id": s.plans.save(a["owner"], a["operationId"], a["question"], a["minutes"])}
    except ValueError as e:
        raise StoreError("plan_conflict", "plan %s/%s: %s" % (a["owner"], a["operationId"], e))


def plans_list(s, a):
    return {"rows": [{"id": r["id"], "owner": r["owner"], "operationId": r["operation_id"], "question": r["question"],
                      "minutes": r["minutes"]} for r in s.plans.list(a["owner"])]}


HANDLERS = {
    "checkpoints.load": lambda s, a: {"checkpoint": s.checkpoints.load(a["threadId"])},
    "checkpoints.put": lambda s, a: s.checkpoints.put(a["checkpoint"]) or {},
    "plans.save": plans_save,
    "plans.list": plans_list,
}

def main():
    unique = "--no-unique" not in sys.argv[1:]
    serve("pyplans" + ("" if unique else "-no-unique") + ("-sqlite-defaults" if SYNCHRONOUS != "EXTRA" else ""), ["checkpoints", "plans"],
          lambda directory, mutant, conv: Stores(directory, unique), HANDLERS)


if __name__ == "__main__":
    main()
