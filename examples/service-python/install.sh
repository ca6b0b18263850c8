#!/usr/bin/env bash
# Installs the LangGraph example service's packages (requirements.txt, from
# PyPI) into a virtual environment under the project's cache and prints the
# environment's python. Idempotent: a venv whose stamp matches
# requirements.txt is reused as it is.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${CRASHMATRIX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/crashmatrix}
venv=$cache/langgraph-venv
stamp=$venv/.requirements
if [[ -x $venv/bin/python ]] && cmp -s "$here/requirements.txt" "$stamp"; then
	echo "$venv/bin/python"
	exit 0
fi
rm -rf "$venv"
mkdir -p "$cache"
python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install -q -r "$here/requirements.txt" >&2
"$venv/bin/python" -m compileall -q "$here" >&2
cp "$here/requirements.txt" "$stamp"
echo "$venv/bin/python"
