# crashmatrix — see README.md. Every target installs what it needs.
GO        ?= go
GOBIN     ?= $(shell $(GO) env GOPATH)/bin
STATICCHECK_VERSION := v0.8.2
BIN       := bin/crashmatrix

.PHONY: all build test test-short bench lint vet staticcheck demo certify tools clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/crashmatrix

# The whole test suite: vet, staticcheck, every package's tests (conformance
# suites against every adapter, the crash matrix with real process kills,
# the mutant tests).
test: vet staticcheck
	$(GO) test -count=1 -timeout 40m ./...

test-short:
	$(GO) test -count=1 -short ./...

# Figures for the README: the full matrix's wall time and kill-restart-recover
# cycles per second on the embedded default, then the store micro-benchmarks.
bench: build
	./$(BIN) bench
	$(GO) test -run '^$$' -bench . -benchtime 200x ./adapters/... ./reference/...

lint: vet staticcheck

vet:
	$(GO) vet ./...

$(GOBIN)/staticcheck:
	GOFLAGS= $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

staticcheck: $(GOBIN)/staticcheck
	$(GOBIN)/staticcheck ./...

tools: $(GOBIN)/staticcheck

demo:
	$(GO) run ./cmd/crashmatrix demo

certify:
	$(GO) run ./cmd/crashmatrix certify

clean:
	rm -rf bin
