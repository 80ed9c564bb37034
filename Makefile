GO      ?= go
BIN     := bin
DATA    ?= ./.lockd-dev
LEASE   ?= 12s
# Test budget: CI has 2 cores and 90 minutes; keep `make test` well under 15.
TESTFLAGS ?= -race -count=1 -timeout 20m

.PHONY: all build run test vet bench clean

all: build

build:
	$(GO) build -o $(BIN)/lockd ./server/cmd/lockd
	$(GO) build -o $(BIN)/lockctl ./ctl/cmd/lockctl

# The local cluster: five lockd processes on loopback serving /demo and
# /payments, data kept in $(DATA) across restarts. Ctrl-C stops it.
run: build
	./$(BIN)/lockd dev --data-dir $(DATA) --lease $(LEASE)

vet:
	$(GO) vet ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

# Every test: unit, state machine, and integration on real lockd processes.
test: vet
	$(GO) test $(TESTFLAGS) ./...

# Benchmarks with the figures the issues ask for (real 5-replica cluster,
# production Raft timing, fsync on).
bench:
	$(GO) test -run=NONE -bench=. -benchtime=2000x ./server/integration/
	$(GO) test -run=NONE -bench=. ./server/fsm/

clean:
	rm -rf $(BIN) $(DATA)
