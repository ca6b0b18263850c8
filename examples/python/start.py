"""Run a store module from its compiled bytecode: python3 -S start.py MODULE [ARGS...]

calls MODULE.main() with sys.argv as if MODULE's file had been run (ARGS
after its name). A script named on the command line is compiled again at
every start; an imported module is read from __pycache__ (after
`python3 -m compileall -q .`, or by itself where PYTHONDONTWRITEBYTECODE is
not set), and `python3 -m MODULE` would first import runpy, which imports
importlib.util and contextlib. crashmatrix starts a store process for
every worker process, so this is worth a tenth of the Python matrix.
"""

import sys

del sys.argv[0]
__import__(sys.argv[0]).main()
