"""The crashmatrix store protocol (crashmatrix-store/1), server side.

Standard library only. A store subclasses nothing: it hands `serve` a
name, the interfaces it implements, a function that opens it on the data
directory, and a table op -> function(args) -> result dict. See
docs/store-protocol.md for the protocol itself.
"""

import gc
import posix  # os itself imports posixpath, stat and _collections_abc: a tenth of a store process's start
import sys

PROTOCOL = "crashmatrix-store/1"


# JSON through the C module behind the json package, where the interpreter
# has it (CPython): importing json itself imports re and enum, a third of
# a store process's start here (python3 -S -X importtime), and crashmatrix
# starts a store process for every worker process. The same text as
# json.dumps(v, separators=(",", ":")) and the same values as json.loads;
# anything else falls back to the json package.
def _c_codec():
    import _json

    class Context:  # what the C scanner reads from json.JSONDecoder
        strict = True
        object_hook = object_pairs_hook = parse_constant = None
        parse_float, parse_int = float, int
        memo = {}

    def default(o):
        raise TypeError("not JSON: %r" % (o,))

    scan = _json.make_scanner(Context())
    encoders = [_json.make_encoder(None, default, _json.encode_basestring_ascii, None, ":", ",", sort, False, True)
                for sort in (False, True)]

    def dumps(v, sort_keys=False):
        return "".join(encoders[sort_keys](v, 0))

    def loads(s):
        i = len(s) - len(s.lstrip())
        v, end = scan(s, i)
        if s[end:].strip():
            raise ValueError("extra data after the JSON value at character %d" % end)
        return v

    sample = {"b": [1, 2.5, "\u00e9\n", None, True], "a": {}}
    if dumps(sample, True) != '{"a":{},"b":[1,2.5,"\\u00e9\\n",null,true]}' or loads(dumps(sample)) != sample:
        raise ImportError("the C JSON codec does not behave as the json package")
    return dumps, loads


try:
    dumps, loads = _c_codec()
except Exception:  # another interpreter, or another _json: the package
    import json

    def dumps(v, sort_keys=False):
        return json.dumps(v, separators=(",", ":"), sort_keys=sort_keys)

    loads = json.loads


def import_sqlite3():
    """The C module behind the sqlite3 package, imported without functools.

    Where the interpreter has it (CPython), _sqlite3 takes only
    functools.lru_cache when it is imported, for each connection's
    statement cache, and importing functools imports collections, keyword,
    operator and reprlib: a fifth of a store process's start. A module of
    that name holding a small cache (by statement text, oldest out first)
    stands in while _sqlite3 is imported, and is gone after, so that
    whoever imports functools later gets the real one. Anything else (no
    _sqlite3, or one that needs more of functools) gets the sqlite3
    package as it is."""
    if "functools" in sys.modules:
        import _sqlite3
        return _sqlite3
    stand_in = type(sys)("functools")
    stand_in.lru_cache = _statement_cache
    sys.modules["functools"] = stand_in
    try:
        import _sqlite3
        return _sqlite3
    except Exception:
        pass
    finally:
        del sys.modules["functools"]
    import sqlite3
    return sqlite3


def _statement_cache(maxsize=128, typed=False):
    """functools.lru_cache(maxsize, typed) for _sqlite3's statement cache.

    _functools, built into the interpreter, holds the C cache functools
    wraps: a statement found there costs no Python call (a cache written
    in Python cost one on every execute, 86,000 of them in a System A
    matrix round). Without _functools, a dict by statement text, oldest
    out first."""
    try:
        from _functools import _lru_cache_wrapper
    except ImportError:
        _lru_cache_wrapper = None

    def wrap(prepare):
        if _lru_cache_wrapper is not None:
            return _lru_cache_wrapper(prepare, maxsize, typed, tuple)
        cache = {}

        def get(sql):
            statement = cache.get(sql)
            if statement is None:
                if len(cache) >= maxsize:
                    del cache[next(iter(cache))]
                statement = cache[sql] = prepare(sql)
            return statement
        return get
    return wrap


class StoreError(Exception):
    """An error reply: code (docs/store-protocol.md section 5), definite."""

    def __init__(self, code, message, definite=True):
        super().__init__(message)
        self.code = code
        self.definite = definite


class Injected(StoreError):
    """Raised by at() when crashmatrix answers fail: roll back, reply."""

    def __init__(self, point):
        super().__init__("injected", "injected fault at " + point, True)


class Conversation:
    """One request at a time over stdin/stdout."""

    # Bytes in, bytes out: sys.stdin's text layer decodes every line
    # through a decoder written in Python (codecs), and sys.stdout's
    # write and flush are two layers over the one write(2) a reply needs.
    def __init__(self):
        self.stdin = sys.stdin.buffer
        self.req_id = None
        self.step = 0

    def send(self, msg):
        out = (dumps(msg) + "\n").encode()
        while out:  # a pipe takes a whole write unless a signal cuts it short
            out = out[posix.write(1, out):]

    def at(self, point):
        """Declare a crash window before the next durable step.

        Returns when the step may run; raises Injected when it must fail;
        exits the process at once when crashmatrix says die (or is gone)."""
        self.step += 1
        self.send({"id": self.req_id, "at": {"point": point, "step": self.step}})
        line = self.stdin.readline()
        if not line:
            posix._exit(137)
        answer = loads(line.decode())
        action = answer.get("action")
        if action == "die":
            posix._exit(137)
        if action == "fail":
            raise Injected(point)
        if action != "continue":
            log("unexpected answer to at:", line.decode(errors="replace").strip())
            posix._exit(3)


def _profiler(conv):
    """With $PYSTORE_PROFILE naming a folder, the process profiles its
    calls (cProfile, CPU time) and writes the profile there, as PID.prof,
    after every reply, with its CPU so far (time.process_time, the
    writing left out) in PID.cpu: crashmatrix kills the store processes of a crashed
    worker (SIGKILL), which never reach an exit hook. Writing the profile
    costs far more than a call; the profile and PID.cpu leave it out.
    $PYSTORE_CPU instead writes PID.cpu alone, without the profiler's own
    cost (examples/python/profile_round.py sums either)."""
    if b"PYSTORE_PROFILE" not in posix.environ and b"PYSTORE_CPU" not in posix.environ:
        return
    import os
    folder = os.environ.get("PYSTORE_PROFILE") or os.environ.get("PYSTORE_CPU")
    import time
    prof = None
    if os.environ.get("PYSTORE_PROFILE"):
        import cProfile
        prof = cProfile.Profile(time.process_time)
    path = os.path.join(folder, "%d" % os.getpid())
    cpu = os.open(path + ".cpu", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    send = conv.send
    spent = [0.0]  # the CPU the writing took
    replies = [0]
    started = time.time()

    def send_and_dump(msg):
        send(msg)
        if prof:
            prof.disable()
        before = time.process_time()
        replies[0] += 1
        os.pwrite(cpu, b"%15.6f %9d %17.6f\n" % (before - spent[0], replies[0], started), 0)  # one write: whole, even if killed
        if prof:
            prof.dump_stats(path + ".prof.tmp")
            os.replace(path + ".prof.tmp", path + ".prof")
        spent[0] += time.process_time() - before
        if prof:
            prof.enable()
    conv.send = send_and_dump
    if prof:
        prof.enable()


def log(*args):
    print(*args, file=sys.stderr, flush=True)


def serve(name, stores, open_store, handlers):
    """Serve requests until stdin ends.

    open_store(dir, mutant, conv) returns the store object; handlers maps
    an op name to a function (store, args) -> result dict. On close the
    store object's close() is called, if it has one, and dropped: the
    process then holds nothing of the directory, and a new hello opens one
    afresh (reopen, section 3). --no-reopen on the command line leaves
    reopen undeclared (crashmatrix then starts a process per client)."""
    # Whatever start-up allocated stays for the process's life: frozen,
    # later collections skip it (the scripts disable the collector while
    # they import).
    gc.freeze()
    gc.enable()
    conv = Conversation()
    store = None
    _profiler(conv)
    for line in conv.stdin:
        if not line.strip():
            continue
        req = loads(line.decode())
        conv.req_id, conv.step = req.get("id"), 0
        op, args = req.get("op"), req.get("args") or {}
        try:
            if op == "hello":
                if args.get("protocol") != PROTOCOL:
                    raise StoreError("unsupported", "this store speaks " + PROTOCOL + ", not " + str(args.get("protocol")))
                store = open_store(args["dir"], args.get("mutant", ""), conv)
                result = {"protocol": PROTOCOL, "name": name, "stores": stores, "reopen": "--no-reopen" not in sys.argv[1:]}
            elif op == "close":
                if hasattr(store, "close"):
                    store.close()
                store = None
                result = {}
            elif store is None:
                raise StoreError("unsupported", "hello first")
            elif op not in handlers:
                raise StoreError("unsupported", "unknown op " + str(op))
            else:
                result = handlers[op](store, args)
            conv.send({"id": conv.req_id, "ok": result if result is not None else {}})
        except StoreError as e:
            conv.send({"id": conv.req_id, "error": {"code": e.code, "definite": e.definite, "message": str(e)}})
        except Exception as e:  # a bug or an unforeseen failure: say we do not know
            import traceback  # only when needed: it costs start-up time
            traceback.print_exc(file=sys.stderr)
            conv.send({"id": conv.req_id, "error": {"code": "unavailable", "definite": False, "message": repr(e)}})
