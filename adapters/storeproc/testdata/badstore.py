"""A store that breaks the protocol in the way argv[1] names, for the
tests of the strict reader. Standard library only."""
import json
import sys
import time

mode = sys.argv[1]
print("badstore starting in mode " + mode, file=sys.stderr, flush=True)
if mode == "exit-at-start":
    print("fatal: cannot open /nonexistent/store.db", file=sys.stderr, flush=True)
    sys.exit(3)


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    req = json.loads(line)
    rid, op = req["id"], req["op"]
    if op == "hello":
        version = "crashmatrix-store/0" if mode == "wrong-version" else req["args"]["protocol"]
        stores = ["operations", "states", "registry", "graph", "locks"]
        if mode == "answers-nothing":
            stores += ["checkpoints", "plans"]
        send({"id": rid, "ok": {"protocol": version, "name": "badstore", "stores": stores}})
        continue
    print("badstore got " + op, file=sys.stderr, flush=True)
    if mode == "not-protocol":
        print("DEBUG handling " + op)
        sys.stdout.flush()
    elif mode == "unasked":
        send({"id": rid + 41, "ok": {"operation": {}}})
    elif mode == "late":
        time.sleep(30)
    elif mode == "exit-mid-request":
        print("badstore: segfault, say", file=sys.stderr, flush=True)
        sys.exit(139)
    elif mode == "missing-field":
        send({"id": rid, "ok": {}})
    elif mode == "wrong-type":
        send({"id": rid, "ok": {"operation": {"operationId": 5}}})
    elif mode == "unknown-outcome":
        send({"id": rid, "error": {"code": "unavailable", "definite": False, "message": "commit: disk I/O error"}})
    elif mode == "not-found":
        send({"id": rid, "error": {"code": "not_found", "definite": True, "message": "operation " + req["args"].get("operationId", "")}})
    elif mode == "answers-nothing":
        send({"id": rid, "error": {"code": "internal", "definite": True, "message": "badstore was sent " + op + " " + json.dumps(req["args"])}})
    elif mode == "bad-step":
        send({"id": rid, "at": {"point": "badstore/x", "step": 2}})
