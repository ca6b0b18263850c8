"""The service side of crashmatrix's service protocol (crashmatrix-service/1,
docs/service-protocol.md), for a service written in Python: newline-delimited
JSON on stdin/stdout, one request at a time, callbacks answered in line.

A service gives serve() its hello declarations and a handler per op; a handler
gets the Conversation, through which it declares crash windows (at), asks the
harness's model (model) and sends events."""

import json
import os
import sys
import threading

PROTOCOL = "crashmatrix-service/1"


class ServiceError(Exception):
    """An error reply: code from the protocol's list, definite or not."""

    def __init__(self, code, message, definite=True):
        super().__init__(message)
        self.code = code
        self.definite = definite


class Injected(ServiceError):
    """A step failed by a `fail` answer: the service's retry policy sees it."""

    def __init__(self, point, retryable):
        super().__init__("injected", "fault injected at %s (retryable: %s)" % (point, retryable))
        self.retryable = retryable


class Conversation:
    def __init__(self):
        self.stdin = sys.stdin
        self.out = sys.stdout
        self.req_id = None
        self.step = 0
        self.windows = set()
        # LangGraph may write checkpoints from a background thread while a
        # node runs: a callback is sent and answered under this lock, so the
        # service never has two callbacks open (section 2).
        self.lock = threading.Lock()
        self.call_lock = threading.RLock()

    def send(self, msg):
        self.out.write(json.dumps(msg, separators=(",", ":")) + "\n")
        self.out.flush()

    def callback(self, kind, body):
        """Sends a callback of the request in progress and returns its answer."""
        with self.lock:
            if self.req_id is None:
                raise RuntimeError("a callback outside a request")
            self.step += 1
            body = dict(body, step=self.step)
            self.send({"id": self.req_id, kind: body})
            line = self.stdin.readline()
            if not line:  # end of input: stop, committing nothing
                os._exit(0)
            answer = json.loads(line)
            if answer.get("id") != self.req_id or answer.get("step") != self.step:
                raise RuntimeError("answer %r does not match callback %d/%d" % (answer, self.req_id, self.step))
            return answer

    def at(self, point):
        """Declares the crash window `point` before the step it names."""
        if point not in self.windows:
            raise RuntimeError("window %s is not declared in hello" % point)
        # Not while another thread's store call is open (section 9: between
        # a call and its done only events may come): LangGraph runs a node
        # while the previous step's checkpoint is still being written.
        with self.call_lock:
            self.act(self.callback("at", {"point": point}), point)

    def model(self, space, document_id, operation_id, content):
        answer = self.callback("model", {"space": space, "documentId": document_id,
                                         "operationId": operation_id, "content": content})
        if "error" in answer:
            e = answer["error"]
            raise ServiceError(e.get("code", "failed"), e.get("message", "model call failed"), e.get("definite", True))
        return answer["extraction"]

    def store_call(self, op, args, run, ok=lambda result: result):
        """Reports a call to one of the service's own stores (section 9):
        `call` before run(), `done` with ok(result) (or the error) after.
        While the call is open the harness counts the durable file steps of
        the service's processes as this call's (the durable-step sweep). The
        whole call holds call_lock, so calls (and `at`) made from two threads
        never come between a call and its done."""
        with self.call_lock:
            self.act(self.callback("call", {"op": op, "args": args}), op)
            try:
                result = run()
            except ServiceError as e:
                self.act(self.callback("done", {"op": op, "error": {"code": e.code, "definite": e.definite, "message": str(e)}}), op)
                raise
            except Exception as e:
                self.act(self.callback("done", {"op": op, "error": {"code": "failed", "definite": False, "message": repr(e)}}), op)
                raise
            self.act(self.callback("done", {"op": op, "ok": ok(result)}), op)
            return result

    def act(self, answer, what):
        """Acts on the answer to `at` or `call`/`done`: continue, die or fail."""
        action = answer.get("action")
        if action == "die":
            os._exit(137)
        if action == "fail":
            raise Injected(what, bool(answer.get("retryable")))
        if action != "continue":
            raise RuntimeError("unknown action %r at %s" % (action, what))

    def event(self, event):
        with self.lock:
            self.send({"id": self.req_id, "event": event})


def serve(declare, handlers):
    """Serves requests until stdin ends.

    declare(hello_args, conv) opens the service for hello's arguments and
    returns (service, declarations), the declarations being hello's reply
    without `protocol`; it raises ServiceError("unsupported", ...) for a
    bug name it does not know. handlers maps an op to f(service, conv, args)."""
    conv = Conversation()
    service = None
    for line in conv.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        conv.req_id, conv.step = req.get("id"), 0
        op, args = req.get("op"), req.get("args") or {}
        try:
            if op == "hello":
                if args.get("protocol") != PROTOCOL:
                    raise ServiceError("unsupported", "this service speaks %s, not %s" % (PROTOCOL, args.get("protocol")))
                service, declared = declare(args, conv)
                conv.windows = set(declared["windows"])
                result = dict(declared, protocol=PROTOCOL)
            elif service is None:
                raise ServiceError("unsupported", "hello first")
            elif op not in handlers:
                raise ServiceError("unsupported", "unknown op %s" % op)
            else:
                result = handlers[op](service, conv, args)
            conv.send({"id": conv.req_id, "ok": result if result is not None else {}})
        except ServiceError as e:
            conv.send({"id": conv.req_id, "error": {"code": e.code, "definite": e.definite, "message": str(e)}})
        except Exception as e:  # a bug or an unforeseen failure: its effect is unknown
            import traceback
            traceback.print_exc(file=sys.stderr)
            conv.send({"id": conv.req_id, "error": {"code": "failed", "definite": False, "message": repr(e)}})
        conv.req_id = None
