# walrelay's two commands (see README.md):
#   make demo   run the relay end to end on a private Postgres and an in-process broker
#   make test   run every test with -race against a real Postgres
# Both install what a fresh machine lacks (the PostgreSQL server package).

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
# Where the Postgres server binaries live; found by pkg/localpg when unset.
PG_BIN   ?= $(firstword $(wildcard /usr/lib/postgresql/*/bin))

.PHONY: all build demo test test-short vet fmt-check deps clean

all: build

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/walrelay ./cmd/walrelay

demo: deps
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/walrelay demo

test: deps vet fmt-check
	$(GO) test -race -count=1 -timeout 20m ./...

# Without -race, for a quick local loop.
test-short: deps
	$(GO) test -count=1 ./...

vet:
	$(GO) vet ./...

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# deps installs the PostgreSQL server (initdb, pg_ctl, postgres) when no
# installation is found. It needs apt-get and root (or sudo).
deps:
	@if [ -n "$$WALRELAY_TEST_PG_DSN" ] || [ -x "$(PG_BIN)/initdb" ] || command -v initdb >/dev/null 2>&1; then \
		exit 0; \
	fi; \
	echo "PostgreSQL server not found: installing it with apt-get"; \
	SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null && \
	ls -d /usr/lib/postgresql/*/bin

clean:
	rm -rf bin
