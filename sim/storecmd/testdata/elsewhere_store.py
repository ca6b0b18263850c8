"""The example SQLite store (examples/python/sqlite_store.py) with its data
kept elsewhere: its database lives in the folder given as the first
argument, not in the one hello names, and it never syncs
(synchronous=OFF). A power loss on the case's lazy mount reaches none of
its files, so a power-loss case of it must come out not exercised
(data-elsewhere), never a pass.

    elsewhere_store.py FOLDER
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples", "python"))

import sqlite_store  # noqa: E402
from storeproto import serve  # noqa: E402


def open_store(directory, mutant, conv):
    elsewhere = sys.argv[1]
    os.makedirs(elsewhere, exist_ok=True)
    store = sqlite_store.Store(elsewhere, conv, False)
    store.db.execute("PRAGMA synchronous=OFF")
    return store


serve("pystore-elsewhere", ["operations", "states", "registry", "graph", "locks"], open_store, sqlite_store.HANDLERS)
