#!/usr/bin/env bash
# Prints the folder make test gives the tests as TMPDIR (case data,
# histories, testscript work folders, lazy mounts' backing folders): a fresh
# one on /dev/shm when TMPDIR is unset and /dev/shm has 4 GiB free, else
# TMPDIR (or /tmp) itself.
#
# Why tmpfs: the crash tests' SQLite files fsync at every commit, and on a
# busy disk one fsync can outlast a worker's 30 s deadline (the case then
# ends undecided, "stuck in an fsync the file system had not finished").
# The disk adds nothing to what they test: a SIGKILL keeps the page cache,
# and power loss is modelled by the lazy file system, whatever lies under it.
set -euo pipefail
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
	free=$(df -P -k /dev/shm | awk 'NR == 2 { print $4 }')
	if [ "${free:-0}" -ge $((4 * 1024 * 1024)) ]; then
		# Open to every user, sticky, as /tmp is: some tests run a
		# server as its own user (initdb as postgres) under it.
		dir=$(mktemp -d /dev/shm/crashmatrix-test-XXXXXX)
		chmod 1777 "$dir"
		echo "$dir"
		exit 0
	fi
fi
echo "${TMPDIR:-/tmp}"
