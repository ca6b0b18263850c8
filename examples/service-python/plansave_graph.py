"""System B of crashmatrix as a real LangGraph graph, served over the service
protocol (crashmatrix-service/1, docs/service-protocol.md).

The second design document's flow: `begin` makes the thread's operation_id
once and keeps it in the graph state, `approve` waits for a person
(interrupt), `save` writes the plan with the document's PlanStore (SQLite,
UNIQUE(owner, operation_id), INSERT ... ON CONFLICT DO NOTHING, then read the
row back). The graph's progress is LangGraph's SqliteSaver checkpointer, in
its own file: the plan row and the checkpoint commit separately, which is
the window the document is about.

    crashmatrix certify --service-cmd "$(examples/service-python/install.sh) plansave_graph.py"

Windows declared (section 5): the catalogue's planSaveBeforeApprove,
planSaveBeforeBusinessCommit, planSaveBeforeCheckpoint, and two of the
service's own in front of the real checkpointer's writes:
service/checkpointer.put (a checkpoint) and service/checkpointer.put_writes
(a node's pending writes), so the matrix crashes inside LangGraph itself.

Store calls reported (section 9, reports: ["calls"]): plans.save around
PlanStore.save, checkpoints.put around the checkpointer's put and
put_writes, so that the durable-step sweep crashes the service between the
fsyncs each makes in its files (section 12).

Broken variants (hello's `bugs`, from `crashmatrix --bug NAME`, or the same
name as a command-line flag --NAME):
  new-operation-id-on-retry  invoking a thread whose save did not finish
                             gives it a fresh operation_id first, as a
                             naive retry does: the save inserts a second row
  no-unique                  the plans table without UNIQUE(owner,
                             operation_id): the retried save adds a row
"""

import os
import sqlite3
import sys
import uuid
from contextlib import closing
from typing import TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from svcproto import Injected, ServiceError, serve

BUGS = ("new-operation-id-on-retry", "no-unique")

WINDOWS = ["planSaveBeforeApprove", "planSaveBeforeBusinessCommit", "planSaveBeforeCheckpoint",
           "service/checkpointer.put", "service/checkpointer.put_writes"]


def connect(path):
    connection = sqlite3.connect(path, timeout=30)
    # sqlite3's default (synchronous=FULL in DELETE journal mode) does not
    # fsync the directory after the commit deletes the journal: a power loss
    # right after a commit can undo it (crashmatrix's power-loss column found
    # it in examples/python). EXTRA does.
    connection.execute("PRAGMA synchronous=EXTRA")
    return connection


class PlanStore:
    """The design document's PlanStore. With a conv (the worker's), each save
    is reported to the harness as the store call plans.save (section 9)."""

    def __init__(self, path, unique=True, create=True, conv=None):
        self.path = path
        self.unique = unique
        self.conv = conv
        if create:
            constraint = ",\n                UNIQUE(owner, operation_id)" if unique else ""
            with closing(connect(path)) as connection, connection:
                connection.execute("""CREATE TABLE IF NOT EXISTS plans (
                    id INTEGER PRIMARY KEY, owner TEXT NOT NULL, operation_id TEXT NOT NULL,
                    question TEXT NOT NULL, minutes INTEGER NOT NULL""" + constraint + ")")

    def save(self, owner, operation_id, question, minutes):
        """A repeated save with the same operation id reads the first row."""
        if self.conv is None:
            return self.commit(owner, operation_id, question, minutes)
        return self.conv.store_call("plans.save", {"owner": owner, "operationId": operation_id, "question": question, "minutes": minutes},
                                    lambda: self.commit(owner, operation_id, question, minutes), lambda row_id: {"id": row_id})

    def commit(self, owner, operation_id, question, minutes):
        insert = "INSERT INTO plans(owner,operation_id,question,minutes) VALUES (?,?,?,?)"
        select = "SELECT id,question,minutes FROM plans WHERE owner=? AND operation_id=?"
        if self.unique:
            insert += " ON CONFLICT(owner,operation_id) DO NOTHING"
        else:
            select += " ORDER BY id DESC LIMIT 1"  # the row just inserted
        with closing(connect(self.path)) as connection, connection:
            connection.execute(insert, (owner, operation_id, question, minutes))
            row = connection.execute(select, (owner, operation_id)).fetchone()
            if tuple(row[1:]) != (question, minutes):
                raise ServiceError("plan_conflict", "operation_id %s of %s already used for another plan" % (operation_id, owner))
            return row[0]

    def list(self, owner):
        if not os.path.exists(self.path):
            return []
        with closing(connect(self.path)) as connection, connection:
            connection.row_factory = sqlite3.Row
            return [dict(row) for row in connection.execute("SELECT * FROM plans WHERE owner=? ORDER BY id", (owner,))]


class WindowedSaver(SqliteSaver):
    """LangGraph's SqliteSaver, unchanged but for a crash window declared in
    front of each of its writes, and each write reported to the harness as
    the store call checkpoints.put (section 9): the thread's state as the
    checkpointer holds it after the write, in the protocol's spelling."""

    conv = None
    values = None

    def put(self, config, checkpoint, metadata, new_versions):
        return self.reported("service/checkpointer.put", config, (checkpoint.get("channel_values") or {}).items(), True,
                             lambda: super(WindowedSaver, self).put(config, checkpoint, metadata, new_versions))

    def put_writes(self, config, writes, task_id, task_path=""):
        return self.reported("service/checkpointer.put_writes", config, writes, False,
                             lambda: super(WindowedSaver, self).put_writes(config, writes, task_id, task_path))

    def reported(self, window, config, values, checkpoint, write):
        """Runs write() behind its window, reported as checkpoints.put with
        the thread's state after it: its values applied (a checkpoint's stay
        the thread's; pending writes only show in this report)."""
        if self.conv is None:
            return write()
        with self.conv.call_lock:  # LangGraph writes from more than one thread
            self.conv.at(window)
            tid = config["configurable"]["thread_id"]
            state = self.state(tid) if checkpoint else dict(self.state(tid))
            state.update({k: v for k, v in values if k in State.__annotations__})
            return self.conv.store_call("checkpoints.put", {"checkpoint": protocol_checkpoint(tid, state)}, write, lambda _: {})

    def state(self, tid):
        if self.values is None:
            self.values = {}
        return self.values.setdefault(tid, {})


def protocol_checkpoint(thread_id, values):
    """A LangGraph thread's state in the protocol's checkpoint spelling."""
    status = values.get("status", "started")
    return {"threadId": thread_id, "owner": values.get("owner", ""), "question": values.get("question", ""),
            "minutes": values.get("minutes", 0), "operationId": values.get("operation_id", ""),
            "status": status, "next": NEXT.get(status, ""), "planId": values.get("plan_id", 0)}


class State(TypedDict, total=False):
    owner: str
    question: str
    minutes: int
    operation_id: str
    status: str
    plan_id: int


# The step a thread runs next, by its status. Not LangGraph's state.next:
# after a crash between a node's put_writes and the checkpoint's put,
# get_state applies the node's pending writes and reports next=() (nothing
# left to run) although the graph has not reached save; a service that
# trusts it stops short (crashmatrix's service/checkpointer.put window found
# it: status approved, next empty, no plan row). invoke(None) does run save.
NEXT = {"started": "approve", "approved": "save", "saved": ""}


class Service:
    def __init__(self, directory, role, bugs, conv):
        self.conv = conv
        self.bugs = bugs
        self.worker = role == "worker"
        self.plans = PlanStore(os.path.join(directory, "plans.db"), "no-unique" not in bugs, create=self.worker,
                               conv=conv if self.worker else None)
        self.checkpoint_path = os.path.join(directory, "checkpoints.db")
        self.graph = None
        if self.worker or os.path.exists(self.checkpoint_path):
            self.open_graph()

    def open_graph(self):
        saver = WindowedSaver(sqlite3.connect(self.checkpoint_path, check_same_thread=False, timeout=30))
        if self.worker:
            saver.setup()
            saver.conv = self.conv
        self.graph = self.build(saver)

    def build(self, saver):
        conv, plans = self.conv, self.plans

        def begin(state: State):
            # The operation_id is made once, at the start of the task, and
            # kept in the graph state (the document's rule).
            return {"operation_id": "%s/op-%s" % (state["owner"], uuid.uuid4().hex[:12]), "status": "started"}

        def approve(state: State):
            if not interrupt({"question": state["question"], "minutes": state["minutes"]}):
                raise ServiceError("not_approved", "the plan was not approved")
            conv.at("planSaveBeforeApprove")
            return {"status": "approved"}

        def save(state: State):
            conv.at("planSaveBeforeBusinessCommit")
            plan_id = plans.save(state["owner"], state["operation_id"], state["question"], state["minutes"])
            conv.at("planSaveBeforeCheckpoint")
            return {"plan_id": plan_id, "status": "saved"}

        g = StateGraph(State)
        g.add_node("begin", begin)
        g.add_node("approve", approve)
        g.add_node("save", save)
        g.add_edge(START, "begin")
        g.add_edge("begin", "approve")
        g.add_edge("approve", "save")
        g.add_edge("save", END)
        return g.compile(checkpointer=saver)

    @staticmethod
    def config(thread_id):
        return {"configurable": {"thread_id": thread_id}}

    def snapshot(self, thread_id):
        """The thread's checkpoint in the protocol's spelling, None before
        its operation_id was checkpointed."""
        if self.graph is None:
            if not os.path.exists(self.checkpoint_path):
                return None
            self.open_graph()
        state = self.graph.get_state(self.config(thread_id))
        values = state.values or {}
        if not values.get("operation_id"):
            return None
        return {"threadId": thread_id, "owner": values["owner"], "question": values["question"],
                "minutes": values["minutes"], "operationId": values["operation_id"],
                "status": values.get("status", "started"), "next": NEXT[values.get("status", "started")],
                "planId": values.get("plan_id", 0)}

    def result(self, thread_id):
        c = self.snapshot(thread_id)
        return {"operationId": c["operationId"], "status": c["status"], "next": c["next"], "planId": c["planId"]}

    def run(self, graph_input, thread_id):
        try:
            # durability="sync": each step's checkpoint is committed before
            # the next step starts. Under LangGraph's default ("async") the
            # save node's business commit ran while approve's checkpoint was
            # still being written: a crash there left the plan row saved
            # and the thread still waiting for approval.
            self.graph.invoke(graph_input, self.config(thread_id), durability="sync")
        except (ServiceError, Injected):
            raise
        except Exception as e:
            # LangGraph may wrap a node's exception; pass an injected fault on as such.
            cause = e.__cause__ or e.__context__
            if isinstance(cause, ServiceError):
                raise cause
            raise

    def start(self, a):
        tid = a["threadId"]
        if self.snapshot(tid) is None:
            state = self.graph.get_state(self.config(tid))
            # A thread whose first steps were cut short continues from its
            # checkpoint; a new one starts from the input.
            self.run(None if state.next else {"owner": a["owner"], "question": a["question"], "minutes": a["minutes"]}, tid)
        return self.result(tid)

    def invoke(self, a):
        tid = a["threadId"]
        c = self.snapshot(tid)
        if c is None:
            raise ServiceError("not_found", "no thread %s" % tid)
        if c["next"] == "approve":
            if not a["approve"]:
                raise ServiceError("not_approved", "thread %s waits for approval" % tid)
            self.run(Command(resume=True), tid)
        elif c["next"] == "save":
            if "new-operation-id-on-retry" in self.bugs:
                self.graph.update_state(self.config(tid), {"operation_id": "%s/op-%s" % (c["owner"], uuid.uuid4().hex[:12])})
            self.run(None, tid)
        return self.result(tid)


def declare(args, conv):
    bugs = set(args.get("bugs") or []) | {b for b in BUGS if "--" + b in sys.argv[1:]}
    unknown = sorted(bugs - set(BUGS))
    if unknown:
        raise ServiceError("unsupported", "unknown bug %s (this service knows %s)" % (", ".join(unknown), ", ".join(BUGS)))
    service = Service(args["dir"], args["role"], bugs, conv)
    # System A's stores, which this service does not have, are the harness's
    # (section 3: a store not in harnessStores is the service's own).
    return service, {"name": "langgraph-plansave", "systems": ["plansave"], "windows": WINDOWS,
                     "harnessStores": ["operations", "states", "registry", "graph", "locks"],
                     "reports": ["calls"], "clock": "own"}


def plans_save(s, conv, a):
    return {"id": s.plans.save(a["owner"], a["operationId"], a["question"], a["minutes"])}


def plans_list(s, conv, a):
    return {"rows": [{"id": r["id"], "owner": r["owner"], "operationId": r["operation_id"], "question": r["question"],
                      "minutes": r["minutes"]} for r in s.plans.list(a["owner"])]}


def worker_only(f):
    def handler(s, conv, a):
        if not s.worker:
            raise ServiceError("unsupported", "a read-role process takes no intents")
        return f(s, a)
    return handler


HANDLERS = {
    "plansave.start": worker_only(Service.start),
    "plansave.invoke": worker_only(Service.invoke),
    "plansave.save": worker_only(lambda s, a: plans_save(s, None, a)),
    "checkpoints.load": lambda s, conv, a: {"checkpoint": s.snapshot(a["threadId"])},
    "plans.list": plans_list,
}

if __name__ == "__main__":
    serve(declare, HANDLERS)
