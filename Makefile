# sluice — MySQL/MariaDB binlog CDC.
#
#   make deps        install missing system packages (Debian, as root) and Go modules
#   make build       static binary in bin/sluice (the product only; no benchmark or test harness)
#   make test        go vet, race-enabled tests (fuzz targets on their corpora)
#   make vet         gofmt, go vet and staticcheck ($(STATICCHECK_VERSION), through the module proxy)
#   make fuzz-smoke  every Fuzz* target for $(FUZZ_SMOKE_TIME)
#   make fuzz        every Fuzz* target for $(FUZZTIME)
#   make demo        run the end-to-end demo (sluice run) against a throwaway MariaDB
#   make chaos       the long crash tests: 20 kills, a 30 s outage, 50 HA faults, 20 aimed pauses
#   make soak        the randomized differential test on $(SOAK_SEEDS) seeds per server
#   make slowlinks   sources over links delayed 1, 4 and 10 s one way (about 15 minutes)
#   make bench       libslave comparison benchmark: bin/sluice-bench libslave, measuring bin/sluice
#   make bench-snapshot, bench-pipeline, bench-sources   the other benchmarks of bin/sluice-bench
#   make clean

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO              ?= go
FUZZTIME        ?= 2m
FUZZ_SMOKE_TIME ?= 10s
TEST_TIMEOUT    ?= 25m
APT_PACKAGES    := mariadb-server mariadb-client redis-server

export DEBIAN_FRONTEND := noninteractive

.PHONY: all deps build bench-build test vet unit fuzz-smoke fuzz demo chaos soak slowlinks bench bench-snapshot bench-pipeline bench-sources bench-debezium clean

all: build test

# Installs only what is missing; apt-get update runs only if something is.
# Maven and a JDK 17 build and run Debezium, the oracle of format debezium's
# tests (internal/dbzharness; its jars are fetched into the test cache once).
# PostgreSQL 15 is the database Debezium's JDBC sink writes to in
# internal/conformance/jdbcsink (throwaway.StartPostgres).
# A temporary policy-rc.d stops apt from starting the system MariaDB service
# (tests start their own throwaway servers; see internal/testenv).
deps:
	@command -v $(GO) >/dev/null 2>&1 || { echo "deps: Go toolchain '$(GO)' not found (need Go >= 1.26, https://go.dev/dl/)" >&2; exit 1; }
	@missing=""; \
	{ command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ]; } || missing="$$missing mariadb-server"; \
	command -v mariadb-install-db >/dev/null 2>&1 || [ -x /usr/bin/mariadb-install-db ] || missing="$$missing mariadb-server"; \
	command -v mariadb >/dev/null 2>&1 || missing="$$missing mariadb-client"; \
	{ command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ]; } || missing="$$missing redis-server"; \
	[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] || missing="$$missing faketime"; \
	command -v gcc >/dev/null 2>&1 || missing="$$missing gcc libc6-dev"; \
	command -v git >/dev/null 2>&1 || missing="$$missing git"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	[ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/javac ] || [ -x /usr/lib/jvm/java-17-openjdk-arm64/bin/javac ] || { [ -n "$${JAVA_HOME:-}" ] && [ -x "$$JAVA_HOME/bin/javac" ]; } || missing="$$missing openjdk-17-jdk-headless"; \
	[ -e /etc/ssl/certs/ca-certificates.crt ] || missing="$$missing ca-certificates"; \
	[ -x /usr/lib/postgresql/15/bin/postgres ] || missing="$$missing postgresql-15"; \
	if [ -n "$$missing" ]; then \
		missing="$$(tr ' ' '\n' <<<"$$missing" | sed '/^$$/d' | sort -u | tr '\n' ' ')"; \
		if [ "$$(id -u)" != 0 ]; then echo "deps: missing packages: $$missing; run 'make deps' as root or: sudo apt-get install -y $$missing" >&2; exit 1; fi; \
		echo "deps: installing $$missing"; \
		policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d; policy=1; fi; \
		trap '[ -z "$$policy" ] || rm -f /usr/sbin/policy-rc.d' EXIT; \
		apt-get update -q; \
		apt-get install -y -q -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold $$missing </dev/null; \
	fi
	$(GO) mod download

# -s -w drop the ELF symbol table and DWARF (75.7 MB to 55.6 MB at
# 94a83f9); Go's own symbol table stays, so SLUICE_CPUPROFILE's profiles
# still name every function.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o bin/sluice ./cmd/sluice

# Every fuzz target runs here on its seeds and on the inputs committed under
# testdata/fuzz (each a past finding); new fuzzing is `make fuzz` or
# `make fuzz-smoke`, kept out of `make test` so that CI stays deterministic.
test: deps
	@unformatted="$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt: these files are not formatted (run gofmt -w on them):" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

STATICCHECK_VERSION ?= v0.8.2

vet:
	@unformatted="$$("$$($(GO) env GOROOT)/bin/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"; \
	if [ -n "$$unformatted" ]; then echo "gofmt: these files are not formatted (run gofmt -w on them):" >&2; echo "$$unformatted" >&2; exit 1; fi
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

unit:
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

# fuzz-targets prints "PACKAGE FUZZNAME" per fuzz target: `go test -list`
# prints the matching names of a package, then "ok  PACKAGE  TIME".
FUZZ_LIST = $(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ { names[n++] = $$1; next } /^ok / { for (i = 0; i < n; i++) print $$2, names[i] } { n = 0 }'

define run_fuzz
	@targets="$$($(FUZZ_LIST))"; \
	if [ -z "$$targets" ]; then echo "no fuzz targets"; exit 0; fi; \
	while read -r pkg name; do \
		echo "--- fuzz $$pkg $$name ($(1))"; \
		$(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(1) "$$pkg" </dev/null; \
	done <<<"$$targets"
endef

fuzz-smoke:
	$(call run_fuzz,$(FUZZ_SMOKE_TIME))

fuzz:
	$(call run_fuzz,$(FUZZTIME))

demo: deps build
	$(GO) run ./internal/demo

# The long crash runs (make test runs shorter versions): `sluice run`
# killed with -9 at $(CHAOS_KILLS) random moments under continuous writes,
# a 30 s sink outage, $(CHAOS_HA_FAULTS) random faults (kill -9,
# SIGSTOP past the lease, etcd cut) among three replicas, and
# $(CHAOS_HA_PAUSES) SIGSTOPs aimed just after a large transaction's COMMIT.
CHAOS_KILLS     ?= 20
CHAOS_HA_FAULTS ?= 50
CHAOS_HA_PAUSES ?= 20
chaos: deps
	SLUICE_KILLS=$(CHAOS_KILLS) SLUICE_OUTAGE=30s SLUICE_HA_FAULTS=$(CHAOS_HA_FAULTS) SLUICE_HA_PAUSES=$(CHAOS_HA_PAUSES) CGO_ENABLED=1 \
		$(GO) test -race -count=1 -timeout 60m -run 'Kill9|Outage|TestHA' -v ./cmd/sluice

# The randomized differential test (make test runs three seeds) on
# $(SOAK_SEEDS) seeds per server, from $(SOAK_SEED_BASE) (empty: from the
# clock; the first seed is logged). A failure names its seed; replay it
# with SLUICE_DIFF_SEED=N go test -run TestRunDifferential ./cmd/sluice.
SOAK_SEEDS     ?= 100
SOAK_SEED_BASE ?=
soak: deps
	SLUICE_DIFF_SEEDS=$(SOAK_SEEDS) SLUICE_DIFF_SEED_BASE=$(SOAK_SEED_BASE) SLUICE_CHARSETS_ALL=1 CGO_ENABLED=1 \
		$(GO) test -race -count=1 -timeout 0 -run 'TestRunDifferential|TestEveryCharacterSet' -v ./cmd/sluice

# The slow-link tests (make test runs the stalled-link ones): the binlog
# reader over links delaying the server's bytes 1, 4 and 10 s one way,
# `sluice run` streaming over them and stopped by SIGTERM, and the
# alignment bound with one source's link at 4 s after an idle period.
slowlinks: deps
	SLUICE_SLOWLINKS=1 CGO_ENABLED=1 \
		$(GO) test -race -count=1 -timeout 60m -run 'SlowLink|StalledLink' -v ./binlog ./cmd/sluice ./pipeline

# The benchmarks are a command of their own, bin/sluice-bench, so that
# bin/sluice links no harness. It runs the readers it measures in their own
# processes: bin/sluice (sluice tail) beside it, its own peers.
bench-build: build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/sluice-bench ./cmd/sluice-bench

# The libslave article's benchmark on MariaDB then MySQL: sluice tail beside
# go-mysql and a raw transfer, and sluice's output formats.
bench: deps bench-build
	bin/sluice-bench libslave

# Debezium itself as the speed peer (issue 25): Debezium Embedded in a JVM
# of its own beside sluice tail --format debezium, streaming (without and
# with schemas), the initial snapshot of the 10M + 2M row tables, then the
# commit-to-consumer latency through a real Kafka at 1k and 10k rows/s
# (sluice run beside Debezium's connector in Kafka Connect), on
# MariaDB (3.5.0's MariaDB connector: debezium-connector-mariadb is not
# served at 3.6.1) then MySQL (3.6.1's MySQL connector). Needs Java and
# Maven (make deps); the harnesses are built once into the test cache.
bench-debezium: deps bench-build
	bin/sluice-bench libslave --modes debezium,debezium-schemas,dbz-embedded,dbz-embedded-schemas
	bin/sluice-bench snapshot --modes dump,sluice-dbz,dbz-embedded
	bin/sluice-bench kafka-latency

# The snapshot benchmark on MariaDB then MySQL, beside mariadb-dump and
# mysqldump (10M + 2M rows on each; a few minutes per server).
bench-snapshot: deps bench-build
	bin/sluice-bench snapshot

# End to end into each sink (file, Kafka on a throwaway Apache Kafka broker, a Redis stream) and the
# commit-to-sink latency, on MariaDB, format sluice.
bench-pipeline: deps bench-build
	bin/sluice-bench pipeline

# Four sources with and without skew alignment (about two minutes).
bench-sources: deps bench-build
	bin/sluice-bench sources

clean:
	rm -rf bin/
	$(GO) clean -testcache
