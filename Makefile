# crashmatrix — see README.md. Every target installs what it needs.
SHELL     := /bin/bash
GO        ?= go
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
STATICCHECK_VERSION := v0.8.2
BIN       := bin/crashmatrix
# The Python interpreter itself, not a version manager's shim (a shell
# script per start): the crash matrix starts a store process per worker.
PYTHON    := $(shell python3 -c 'import sys; print(sys.executable)' 2>/dev/null || echo python3)

.PHONY: all build test test-short bench bench-python bench-java bench-explore bench-explore-count bench-mutants bench-load lint vet staticcheck xmllint localpg demo certify tools clean containers certify-containers bench-containers screenshots certify-python certify-java certify-node docs

all: build

# The worker binaries (one per backend, each linking only its own) are
# built without cgo: statically linked, a worker process starts without the
# dynamic loader and the C library (a run starts thousands of them; nothing
# in a worker needs cgo, SQLite included); and with the tag
# crashmatrix_worker, which leaves out the lazy file system (FUSE) only a
# supervisor mounts. cmd/crashmatrix-worker's tests check these lines.
WORKER_BUILD := CGO_ENABLED=0 $(GO) build -tags crashmatrix_worker
build:
	$(GO) build -o $(BIN) ./cmd/crashmatrix
	$(WORKER_BUILD) -o bin/crashmatrix-worker ./cmd/crashmatrix-worker
	$(WORKER_BUILD) -o bin/crashmatrix-worker-servers ./cmd/crashmatrix-worker-servers
	$(WORKER_BUILD) -o bin/crashmatrix-worker-storecmd ./cmd/crashmatrix-worker-storecmd

# Container images for the server backends on machines without Docker or a
# registry: podman from Debian, PostgreSQL from Debian packages, Neo4j 5.26
# from Maven Central. Built once; later runs reuse them.
PODMAN_ENV := . ci/containers/env.sh && \
	export CRASHMATRIX_POSTGRES_IMAGE=localhost/crashmatrix/postgres:15 CRASHMATRIX_NEO4J_IMAGE=localhost/crashmatrix/neo4j:5.26

containers:
	bash ci/containers/setup-podman.sh
	bash ci/images/postgres/build.sh
	bash ci/images/neo4j/build.sh

# The whole test suite: vet, staticcheck, every package's tests (conformance
# suites against every adapter, the crash matrix with real process kills on
# SQLite, on PostgreSQL, and on PostgreSQL + Neo4j in containers started by
# testcontainers-go, the scenario library in both modes, the mutant tests).
# Packages run one at a time: the crash tests measure leases in wall time.
# Their temporary folders are on tmpfs where there is room (ci/test-tmpdir.sh
# says why), removed afterwards; the podman service `containers` started is
# stopped afterwards too (ci/containers/teardown.sh), pass or fail.
test: vet staticcheck xmllint localpg containers
	tmp=$$(bash ci/test-tmpdir.sh) && \
	trap 'bash $(CURDIR)/ci/containers/teardown.sh; case "$$tmp" in /dev/shm/crashmatrix-test-*) rm -rf "$$tmp" ;; esac' EXIT && \
	echo "make test: temporary folders in $$tmp" && \
	$(PODMAN_ENV) && TMPDIR=$$tmp $(GO) test -p 1 -count=1 -timeout 60m ./... && \
	cd examples/boltstore && $(GO) vet ./... && TMPDIR=$$tmp $(GO) test -count=1 -timeout 20m ./...

test-short:
	$(GO) test -count=1 -short ./...

# The example stores in other languages, certified as a team would: the
# conformance suites over the store protocol, then the whole crash matrix
# (docs/store-protocol.md). make test certifies them on a subset of windows.
# The Python stores run as modules (-m) from bytecode compiled once: a script
# named on the command line is compiled again at every start, a sixth of a
# store process's start-up, which the matrix pays per store process.
certify-python: build
	$(PYTHON) -m compileall -q examples/python
	cd examples/python && ../../$(BIN) certify --store-cmd "$(PYTHON) -S start.py sqlite_store" --plansave-cmd "$(PYTHON) -S start.py plansave_store"

certify-java: build
	examples/java/build.sh
	CRASHMATRIX_JAVA_CONFORMANCE=1 $(GO) test -count=1 -timeout 30m -run TestJavaStoreConformance ./adapters/storeproc/
	cd examples/java && ../../$(BIN) certify --conformance=false --store-cmd "$(JAVA_STORE)"

certify-node: build
	cd examples/node && ../../$(BIN) certify --store-cmd "node store.js" --plansave-cmd "node store.js"

# The figures of docs/performance.md, written there by the runs themselves
# (a section per run, with its date, commit, machine and load average): the
# full matrix's wall time and kill-restart-recover cycles per second on the
# embedded default, exploration rates in both modes and each mutant's time
# to a violation and to its shrunk scenario; then the full matrix on
# PostgreSQL + Neo4j with the containers already up; then the load check.
bench: build
	./$(BIN) bench --doc docs/performance.md
	$(GO) test -run '^$$' -bench FaultFreeSQLite -benchtime 5x ./faults/lazyfs/
	$(MAKE) bench-python
	$(MAKE) bench-java
	$(MAKE) bench-explore
	$(MAKE) bench-mutants
	$(MAKE) bench-explore-count
	$(MAKE) bench-containers
	$(MAKE) bench-load

# The example stores in other languages next to the Go SQLite matrix, each
# round side by side in one run (issue 40's targets: the Python store's
# System A matrix <= 1.5x the Go one; the Java store's <= 4x, and its
# certify, conformance suites then full matrix, <= 5 min on a quiet
# machine), written into docs/performance.md ("bench store python",
# "bench store java"); a target not met is printed with where the time
# went.
# examples/java/build.sh builds the jar, takes sqlite-jdbc's native library
# out of it once and dumps the class-data-sharing archive the command names
# (what each flag saves: docs/certify-other-language.md; build.sh trains the
# archive with the same flags).
JAVA_STORE := java -XX:SharedArchiveFile=target/jstore.jsa -Dorg.sqlite.lib.path=target/native -Dorg.sqlite.lib.name=libsqlitejdbc.so -XX:TieredStopAtLevel=1 -XX:CompileThresholdScaling=3 -Djava.locale.providers=COMPAT -XX:+UseSerialGC -XX:-UsePerfData -Xlog:disable -Xlog:all=warning:stderr -jar target/jstore.jar
bench-python: build
	$(PYTHON) -m compileall -q examples/python
	cd examples/python && ../../$(BIN) bench-store --rounds 3 --target 1.5 --name python --doc ../../docs/performance.md --store-cmd "$(PYTHON) -S start.py sqlite_store"

bench-java: build
	examples/java/build.sh
	cd examples/java && ../../$(BIN) bench-store --rounds 1 --target 4 --certify 5m --name java --doc ../../docs/performance.md --store-cmd "$(JAVA_STORE)"

# Every built-in mutant certified RUNS times (20) while two CPU-bound
# processes run: each must be caught in every run (ci/bench-mutants.sh).
bench-mutants: build
	bash ci/bench-mutants.sh

# certify's default exploration count (internal/explorerun.DefaultCount)
# measured again: the first schedule that breaks each mutant only
# exploration found, over a sample of seeds, and the exploration's time
# beside the matrix's in one certify (ci/bench-explore-count.sh).
bench-explore-count: build
	bash ci/bench-explore-count.sh

# The unmodified reference explored for EXPLORE_MAX schedules on each of
# EXPLORE_SEEDS (500,000 in all by default): any finding fails the target
# with its shrunk scenario under crashmatrix-findings/.
EXPLORE_SEEDS ?= 1 2 3 4
EXPLORE_MAX   ?= 125000
bench-explore: build
	@total=0; for s in $(EXPLORE_SEEDS); do \
		out=$$(./$(BIN) explore --seed $$s --max $(EXPLORE_MAX) --budget 3h 2>&1) || { echo "$$out"; exit 1; }; \
		echo "$$out" | tail -n 2; \
		n=$$(echo "$$out" | sed -nE 's/^([0-9]+) schedules in .*/\1/p' | tail -n 1); \
		total=$$((total + n)); \
	done; met=met; [ $$total -ge 500000 ] || met="not met"; \
	echo "explore: $$total schedules on the unmodified reference over seeds $(EXPLORE_SEEDS), no violation (target >= 500000 clean: $$met)"

bench-containers: build containers
	$(PODMAN_ENV) && ./$(BIN) bench --backend containers --rounds 3 --cycles 0 --explore 0 --doc docs/performance.md

# Load check: certify on the embedded default and on containers, 3 runs on
# the machine as it is, then 10 in a row while two CPU-bound processes run;
# then the Java example store (certify --store-cmd "$(JAVA_STORE)", the
# conformance suites and the full matrix), 1 run, then 3 loaded; prints
# each run's verdict, not-exercised and undecided counts, wall time and
# lease TTL, then the same-verdict count and the loaded/idle wall-time
# ratio. Fails unless every backend certified in every loaded run with
# nothing left not exercised. BACKENDS=sqlite RUNS=... IDLE_RUNS=...
# JAVA_RUNS=... narrow it.
bench-load: build containers
	examples/java/build.sh
	set -o pipefail && $(PODMAN_ENV) && JAVA_STORE='$(JAVA_STORE)' bash ci/bench-load.sh | $(GO) run ./internal/docstest/docsgen -section bench-load docs/performance.md

# The program output the README and the guides quote (blocks marked
# <!-- output: COMMAND -->), run again and written in; TestDocs fails
# until they match what the program prints.
docs: build
	$(GO) run ./internal/docstest/docsgen -bin bin README.md docs/*.md

lint: vet staticcheck

vet:
	$(GO) vet ./...

$(GOBIN)/staticcheck:
	GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(GOBIN)/staticcheck
	$(GOBIN)/staticcheck ./...

# xmllint (Debian's libxml2-utils) validates the JUnit XML against
# report/testdata/junit.xsd in the report package's tests.
xmllint:
	@command -v xmllint >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libxml2-utils; }

# PostgreSQL server binaries of this machine (Debian's postgresql-15): the
# CLI tests fault a server given by DSN, not started in a container.
localpg:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15; }

tools: $(GOBIN)/staticcheck xmllint localpg

# PNGs of a failing and a passing HTML report under docs/ (headless
# Chromium from Debian, installed by the script when missing).
screenshots:
	bash docs/screenshots.sh

demo:
	$(GO) run ./cmd/crashmatrix demo

certify:
	$(GO) run ./cmd/crashmatrix certify

certify-containers: containers
	$(PODMAN_ENV) && $(GO) run ./cmd/crashmatrix certify --backend containers

clean:
	rm -rf bin
