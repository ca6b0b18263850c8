"""nsstore.py SHARED STORE-COMMAND...: runs STORE-COMMAND (a store of the
store protocol) on SHARED/<namespace> instead of hello's dir, as a store on
a server keeps every case's data in one place and scopes it by hello's
namespace. Each process first records what it was started with (argv, cwd,
environment) in SHARED/started/<pid>.json. Standard library only."""
import json
import os
import subprocess
import sys

shared, inner = sys.argv[1], sys.argv[2:]
os.makedirs(os.path.join(shared, "started"), exist_ok=True)
with open(os.path.join(shared, "started", "%d.json" % os.getpid()), "w") as f:
    json.dump({"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ)}, f)

store = subprocess.Popen(inner, stdin=subprocess.PIPE)  # its stdout and stderr are ours
for line in sys.stdin.buffer:
    if line.strip():
        msg = json.loads(line)
        if msg.get("op") == "hello":
            msg["args"]["dir"] = os.path.join(shared, "ns-" + msg["args"]["namespace"])
            os.makedirs(msg["args"]["dir"], exist_ok=True)
            line = (json.dumps(msg) + "\n").encode()
    store.stdin.write(line)
    store.stdin.flush()
store.stdin.close()
sys.exit(store.wait())
