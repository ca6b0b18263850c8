#!/usr/bin/env bash
# Renders the HTML report of a failing run (certify --backend memory) and of
# a passing run (certify on the embedded default, in-process) to PNG under
# docs/, with headless Chromium from Debian's packages (installed here with
# apt-get when missing). Run from anywhere, as root on a fresh machine:
#   docs/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
make -s build # bin/crashmatrix: the replay commands in the reports name it

# A failing run: the memory store forgets everything on restart. certify
# exits 1 then, which is what this run is for.
bin/crashmatrix certify --backend memory --in-process --quiet --workdir "$work/certify" --html "$work/failing.html" --junit "$work/failing.xml" >"$work/failing.txt" || [ $? -eq 1 ]
# One failing scenario, as `run` reports it, with real worker processes
# killed by SIGKILL (real pids and times): one case, its timeline open.
bin/crashmatrix run scenarios/library/mutant-skip-revision-check.yaml --workdir "$work/run" --html "$work/run-failing.html" >"$work/run.txt" || true
# A passing run on the embedded default.
bin/crashmatrix certify --in-process --quiet --html "$work/passing.html" >"$work/passing.txt"

shot() { # shot HTML PNG HEIGHT
	chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1 \
		--window-size=1280,"$3" --screenshot="$PWD/$2" "file://$1" >/dev/null 2>&1
	echo "wrote $2"
}
shot "$work/failing.html" docs/report-failing.png 1400
shot "$work/run-failing.html" docs/report-run-failing.png 2600
shot "$work/passing.html" docs/report-passing.png 1100

# The JUnit XML as a real JUnit consumer renders it: junit2html (PyPI), in a
# virtual environment of its own.
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q junit2html==31.1.4
"$work/venv/bin/junit2html" "$work/failing.xml" "$work/junit.html"
shot "$work/junit.html" docs/junit-junit2html.png 700
