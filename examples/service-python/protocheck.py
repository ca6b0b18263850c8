"""A small stand-in for crashmatrix's side of the service protocol, System B
only: it checks a plansave service against docs/service-protocol.md and its
schema, and crashes it at every window occurrence it declares.

    python protocheck.py [--expect-fail I8] [--bug NAME] [--window POINT] -- SERVICE COMMAND...

Every line either side sends is validated against
docs/service-protocol.schema.json (with docs/store-protocol.schema.json for
its $refs). A fault-free probe run of one thread (start, invoke with
approval) records the windows reached, in order; then for each occurrence k
of each window one case: a fresh dir, the same thread, the service killed
(`die`) at its k-th `at` (and, for the `unknown` kind, right after the
answer `continue`, at its next message), a new process that invokes the
thread again until it is saved, and the checks of I8 on what a read-role
process reads back: one plan row per logical save, the checkpoint's planId
that row's id, status saved, and the conflicting probe refused. Prints one
line per case and exits 0 when every case passes (or, with --expect-fail
I8, when at least one case fails I8 and none fails otherwise), 1 otherwise,
2 on a protocol violation."""

import json
import os
import subprocess
import sys
import tempfile

import jsonschema
import referencing

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, "..", "..", "docs")


def load_schema():
    with open(os.path.join(DOCS, "service-protocol.schema.json")) as f:
        service = json.load(f)
    with open(os.path.join(DOCS, "store-protocol.schema.json")) as f:
        store = json.load(f)
    registry = referencing.Registry().with_resources([
        (service["$id"], referencing.Resource.from_contents(service)),
        (store["$id"], referencing.Resource.from_contents(store)),
    ])
    def validator(name):
        return jsonschema.Draft202012Validator({"$ref": service["$id"] + "#/$defs/" + name}, registry=registry)
    return validator


VALIDATOR = load_schema()
KINDS = {k: VALIDATOR(k) for k in ("Request", "Reply", "Callback", "EventLine", "Answer")}


class Violation(Exception):
    pass


def check(kind, msg, op=None):
    errors = list(KINDS[kind].iter_errors(msg))
    if kind == "Reply" and op and "ok" in msg:
        errors += list(VALIDATOR("result:" + op).iter_errors(msg["ok"]))
    if errors:
        raise Violation("%s %s: %s" % (kind, json.dumps(msg), errors[0].message))


class Killed(Exception):
    """The harness killed the service (a `die`, or the kill after `unknown`)."""


class Service:
    def __init__(self, argv, directory, role, plan=None, bugs=()):
        env = dict(os.environ, CRASHMATRIX_SERVICE_DIR=directory, CRASHMATRIX_STORE_DIR=directory,
                   CRASHMATRIX_SERVICE_NAMESPACE="check")
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True, cwd=HERE)
        self.next_id = 0
        # [`at` answers left before the fault, kind, the kill seen], shared
        # by the processes of one case
        self.plan = plan
        self.reached = []
        self.killed_after_unknown = False
        self.hello = self.request("hello", {"protocol": "crashmatrix-service/1", "role": role, "dir": directory,
                                            "namespace": "check", "space": "check", "holder": "h/%d" % self.p.pid,
                                            "bugs": list(bugs), "leaseTtlMillis": 2000, "claimTtlMillis": 2000,
                                            "batchSize": 4, "seed": 1})

    def send(self, kind, msg):
        check(kind, msg)
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()

    def kill(self):
        self.p.kill()
        self.p.wait()
        raise Killed()

    def request(self, op, args):
        rid = self.next_id
        self.next_id += 1
        self.send("Request", {"id": rid, "op": op, "args": args})
        step = 0
        while True:
            line = self.p.stdout.readline()
            if not line:
                code = self.p.wait()
                if code == 137 and self.plan is not None and self.plan[0] == -1 and self.plan[1] == "crash" and not self.plan[2]:
                    self.plan[2] = True
                    raise Killed()
                raise Violation("service exited (%s) while %s waited for its reply" % (code, op))
            msg = json.loads(line)
            if self.killed_after_unknown:
                self.kill()
            if msg.get("id") != rid:
                raise Violation("line %s: id is not %d" % (line.strip(), rid))
            if "event" in msg:
                check("EventLine", msg)
                continue
            if "ok" in msg or "error" in msg:
                check("Reply", msg, op)
                return msg
            check("Callback", msg)
            step += 1
            kind = next(k for k in msg if k != "id")
            if msg[kind]["step"] != step:
                raise Violation("callback %s: step is not %d" % (line.strip(), step))
            if kind in ("call", "done"):
                # Its own stores' calls (section 9): only with reports: ["calls"],
                # only System B's stores; answered continue (no fault here).
                if "calls" not in self.hello["ok"].get("reports", []):
                    raise Violation("callback %s: %s without reports: [calls]" % (line.strip(), kind))
                if not msg[kind]["op"].startswith(("checkpoints.", "plans.")):
                    raise Violation("callback %s: a plansave service calls only checkpoints.* and plans.*" % line.strip())
                self.send("Answer", {"id": rid, "step": step, "action": "continue"})
                continue
            if kind != "at":
                raise Violation("callback %s: a plansave service sends only `at`, `call` and `done`" % line.strip())
            point = msg["at"]["point"]
            if point not in self.hello["ok"]["windows"]:
                raise Violation("at %s: window not declared" % point)
            self.reached.append(point)
            action = "continue"
            if self.plan is not None:
                if self.plan[0] == 0:
                    if self.plan[1] == "crash":
                        action = "die"
                    else:
                        self.killed_after_unknown = True
                self.plan[0] -= 1
            self.send("Answer", {"id": rid, "step": step, "action": action})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


THREAD = {"threadId": "t1", "owner": "alice", "question": "plan the trip", "minutes": 30}


def drive(argv, directory, plan, bugs, log):
    """Runs the thread to `saved`, restarting the service after each kill."""
    for attempt in range(6):
        try:
            s = Service(argv, directory, "worker", plan, bugs)
            r = s.request("plansave.start", THREAD)
            log.append(("start", r))
            for _ in range(3):
                if "ok" in r and r["ok"]["status"] == "saved":
                    break
                r = s.request("plansave.invoke", {"threadId": "t1", "approve": True})
                log.append(("invoke", r))
            s.close()
            return s.reached
        except Killed:
            continue
    raise Violation("the thread did not reach `saved` in 6 processes")


def judge(argv, directory, bugs):
    """I8 on what a read-role process reads back, and the conflicting probe."""
    r = Service(argv, directory, "read", None, bugs)
    rows = r.request("plans.list", {"owner": "alice"})["ok"]["rows"]
    cp = r.request("checkpoints.load", {"threadId": "t1"})["ok"]["checkpoint"]
    r.close()
    problems = []
    if len(rows) != 1:
        problems.append("I8: %d plan rows for one logical save %s" % (len(rows), [(x["id"], x["operationId"]) for x in rows]))
    if cp is None or cp["status"] != "saved" or cp["next"] != "":
        problems.append("I8: checkpoint not saved: %s" % cp)
    elif rows and cp["planId"] != rows[0]["id"]:
        problems.append("I8: checkpoint planId %d is not the first row's id %d" % (cp["planId"], rows[0]["id"]))
    if cp is not None:
        w = Service(argv, directory, "worker", None, bugs)
        probe = w.request("plansave.save", {"owner": "alice", "operationId": cp["operationId"], "question": "another", "minutes": 1})
        w.close()
        if "error" not in probe or probe["error"]["code"] != "plan_conflict":
            problems.append("I8: the conflicting save was not refused: %s" % probe)
    return problems


def main():
    args = sys.argv[1:]
    expect = None
    bugs = []
    only = None
    while args and args[0] != "--":
        if args[0] == "--expect-fail":
            expect = args[1]
            args = args[2:]
        elif args[0] == "--window":
            only = args[1]
            args = args[2:]
        elif args[0] == "--bug":
            bugs.append(args[1])
            args = args[2:]
        else:
            sys.exit("usage: protocheck.py [--expect-fail I8] [--bug NAME] [--window POINT] -- COMMAND...")
    argv = args[1:]
    try:
        with tempfile.TemporaryDirectory() as d:
            reached = drive(argv, d, None, bugs, [])
            problems = judge(argv, d, bugs)
            if problems:
                print("probe FAIL " + "; ".join(problems))
                return 1
        print("probe: windows reached in order: " + ", ".join(reached))
        failed = passed = 0
        for k, point in enumerate(reached):
            if only is not None and point != only:
                continue
            for kind in ("crash", "unknown"):
                with tempfile.TemporaryDirectory() as d:
                    drive(argv, d, [k, kind, False], bugs, [])
                    problems = judge(argv, d, bugs)
                name = "%s#%d %s" % (point, reached[:k + 1].count(point), kind)
                if problems:
                    failed += 1
                    print("%-45s FAIL %s" % (name, "; ".join(problems)))
                else:
                    passed += 1
                    print("%-45s pass" % name)
        print("%d pass, %d FAIL" % (passed, failed))
    except Violation as e:
        print("protocol violation: %s" % e)
        return 2
    if expect:
        return 0 if failed > 0 else 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
