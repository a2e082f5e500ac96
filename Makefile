# dq: build, run and test the module. `make run` and `make test` work on a
# fresh Debian machine: they install what is missing first.

CARGO   ?= cargo
SERVER  ?= redis-server
PORT    ?= 6379
RUN_DIR := target/run
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

VALKEY  ?= valkey-server
# A minimal Debian 13 root holding Redis 8.0 and Valkey 8.1 (see debian13).
DEBIAN13 ?= $(abspath target/debian13)
D13      := $(DEBIAN13)/dq
QUICK   ?=
FUZZ_SECS    ?= 60
DQ_SOAK_SECS ?= 180
DQ_FAILOVER_SECS ?= 60

.PHONY: all deps valkey debian13 build release install run check test examples bench instructions fuzz soak failover clippy fmt clean relay dashboard

all: release relay dashboard

# Debian packages: the server, the libclang that bindgen needs to build the
# redis-module crate, and the C compiler for the crate's C shim.
deps:
	@missing=""; \
	command -v $(SERVER) >/dev/null 2>&1 || missing="$$missing redis-server"; \
	dpkg -s libclang-dev >/dev/null 2>&1 || missing="$$missing libclang-dev"; \
	command -v cc >/dev/null 2>&1 || missing="$$missing build-essential"; \
	if [ -n "$$missing" ]; then \
		echo "make: installing$$missing"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@command -v $(CARGO) >/dev/null 2>&1 || { \
		echo "make: cargo is missing: install Rust (https://rustup.rs) first"; exit 1; }

# Valkey 8 for the second run of the integration tests: Debian bookworm has
# it in backports only, enabled from the machine's own apt sources.
valkey:
	@command -v $(VALKEY) >/dev/null 2>&1 || { \
		echo "make: installing valkey-server from backports"; \
		$(SUDO) scripts/enable-backports && \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			-t "$$(. /etc/os-release && echo $$VERSION_CODENAME)-backports" valkey-server; }

# Redis 8.0 and Valkey 8.1 for the third and fourth runs: Debian 13's
# packages, in a minimal Debian 13 root that scripts/debian13 makes once
# with debootstrap from the machine's own Debian mirror (taken from its apt
# sources, like enable-backports). $(D13)/redis-server, redis-cli,
# valkey-server and valkey-cli run them through the root's loader.
debian13:
	@[ -f $(DEBIAN13)/.dq-complete ] || $(SUDO) scripts/debian13 $(DEBIAN13)

build: deps
	$(CARGO) build

release: deps
	$(CARGO) build --release

# The HTTP relay (relay/, on the consume loop in client/): target/release/dq-relay.
relay: deps
	$(CARGO) build --release -p dq-relay

# The web dashboard and /metrics (dashboard/): target/release/dq-dashboard.
dashboard: deps
	$(CARGO) build --release -p dq-dashboard

# Copies the release build to $(DESTDIR)$(MODULEDIR), using sudo only when
# that directory is not writable. Debian's systemd unit for redis-server
# runs code only from /usr/lib and /lib, hence the default; Redis refuses
# a module file without execute permission, hence 0755.
MODULEDIR ?= /usr/lib/redis/modules

install: release
	@so="$${CARGO_TARGET_DIR:-target}/release/libdq.so"; \
	dest='$(DESTDIR)$(MODULEDIR)'; \
	as=; install -d "$$dest" 2>/dev/null && [ -w "$$dest" ] || as='$(SUDO)'; \
	$$as install -d "$$dest" && \
	$$as install -m 0755 "$$so" "$$dest/libdq.so" && \
	echo "make: installed $$dest/libdq.so" && \
	echo "Add this line to your redis.conf (Debian: /etc/redis/redis.conf) and restart redis-server:" && \
	echo "" && \
	echo "    loadmodule $(MODULEDIR)/libdq.so" && \
	echo "" && \
	echo "Settings can follow it (loadmodule $(MODULEDIR)/libdq.so lease-ms 30000); see redis.conf.example."

# Foreground server on 127.0.0.1:$(PORT) with redis.conf.example and the
# module loaded; its data goes to $(RUN_DIR). Ctrl-C stops it.
run: release
	@mkdir -p $(RUN_DIR)
	$(SERVER) redis.conf.example --port $(PORT) --dir $(abspath $(RUN_DIR)) \
		--loadmodule $(abspath target/release/libdq.so)

# The quick loop while changing the module, in a few minutes and without
# sudo or the Debian 13 root: build, clippy, every workspace crate's unit
# tests (the module's replay the fuzz seeds and findings), then the
# module's integration tests on the default server line. `make test`
# stays the full gate (CI runs it).
check:
	@command -v $(SERVER) >/dev/null 2>&1 || { \
		echo "make check: $(SERVER) is missing: run make deps (or make test) once"; exit 1; }
	$(CARGO) build
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	scripts/check-docs
	scripts/check-layers
	$(CARGO) test --workspace --lib --bins
	$(CARGO) test --test '*'

# Unit tests, then integration tests against real servers that the tests
# start on free loopback ports and always stop, once per server line:
# Debian 12's Redis 7.0 and Valkey 8.0 (backports), Debian 13's Redis 8.0
# and Valkey 8.1. Each run uses its own line's cli for `--cluster create`.
# Then the client examples, dq's records read through PHP's Predis (a client
# nobody here wrote; php-cli and php-predis from apt), the Python and
# Node.js libraries, the client
# READMEs' quick starts as a user runs them (scripts/test-snippets), and the
# dashboard's browser tests (chromium and chromium-driver from apt) on a
# server and a 3-master cluster of each Debian 12 line, 15 s of the
# Sentinel failover run (on the debug
# build, so CI builds no release module for it) and 10 s of each fuzzer.
# First, without network: every relative link of README.md and docs/
# names a file and a heading that exist (scripts/check-docs), and the
# module's layers keep their dependency rule (scripts/check-layers).
test: build valkey debian13
	scripts/check-docs
	scripts/check-layers
	@echo "make: tests on $$(redis-server --version | cut -d' ' -f1-3)"
	scripts/check-members
	$(CARGO) test --workspace
	@echo "make: integration tests on $$($(VALKEY) --version | cut -d' ' -f1-3)"
	DQ_SERVER=$(VALKEY) DQ_CLI=valkey-cli $(CARGO) test --test '*'
	@echo "make: integration tests on $$($(D13)/redis-server --version | cut -d' ' -f1-3)"
	DQ_SERVER=$(D13)/redis-server DQ_CLI=$(D13)/redis-cli $(CARGO) test --test '*'
	@echo "make: integration tests on $$($(D13)/valkey-server --version | cut -d' ' -f1-3)"
	DQ_SERVER=$(D13)/valkey-server DQ_CLI=$(D13)/valkey-cli $(CARGO) test --test '*'
	@echo "make: the Rust client library and the HTTP relay on $(VALKEY) (on redis-server: cargo test --workspace above)"
	DQ_SERVER=$(VALKEY) DQ_CLI=valkey-cli $(CARGO) test -p dq-client -p dq-relay --test '*'
	scripts/test-examples
	scripts/test-php
	@echo "make: the client libraries (Python, Node.js) and the dashboard (headless Chromium), on redis-server and $(VALKEY)"
	scripts/test-python
	scripts/test-node
	scripts/with-servers --cluster -- scripts/test-snippets
	scripts/test-dashboard
	DQ_SERVER=$(VALKEY) DQ_CLI=valkey-cli scripts/test-python
	DQ_SERVER=$(VALKEY) DQ_CLI=valkey-cli scripts/test-node
	DQ_SERVER=$(VALKEY) DQ_CLI=valkey-cli scripts/test-dashboard
	DQ_MODULE=$${CARGO_TARGET_DIR:-target}/debug/libdq.so DQ_FAILOVER_SECS=15 scripts/failover
	FUZZ_SECS=10 scripts/fuzz

# The client examples (Python redis-py, Node.js ioredis, Rust redis crate)
# against a real server; installs redis-py into a venv and ioredis from the
# lockfile first (nodejs/npm/python3-venv from apt when missing).
examples: build
	scripts/test-examples

# Benchmark: dq beside the client-side designs it replaces, on servers it
# starts itself; then the relay, and sharded queues of 1, 2 and 4 shards on a
# 4-master cluster; each client library's Worker against a plain POP/ACK
# loop (scripts/bench-clients). QUICK=1 runs in under a minute. Writes
# target/bench/results.md, lateness.svg, relay.md, sharded.md and
# worker-{python,node,rust}.md. DQ.ADD
# against ZADD is also measured on $(VALKEY) and $(D13)'s two servers,
# each line that is installed (make valkey debian13).
bench: release
	DQ_BENCH_QUICK=$(QUICK) DQ_SERVER=$(SERVER) DQ_VALKEY=$(VALKEY) DQ_DEBIAN13=$(D13) \
		$(CARGO) bench --bench dq
	DQ_BENCH_QUICK=$(QUICK) DQ_SERVER=$(SERVER) $(CARGO) bench -p dq-relay --bench relay
	DQ_BENCH_QUICK=$(QUICK) DQ_SERVER=$(SERVER) DQ_MODULE=$(abspath target/release/libdq.so) \
		$(CARGO) bench -p dq-client --bench sharded
	DQ_BENCH_QUICK=$(QUICK) DQ_SERVER=$(SERVER) DQ_MODULE=$(abspath target/release/libdq.so) $(CARGO) bench -p dq-dashboard --bench scale
	DQ_BENCH_QUICK=$(QUICK) DQ_SERVER=$(SERVER) DQ_MODULE=$(abspath target/release/libdq.so) scripts/bench-clients

# Instructions per DQ.ADD, ZADD and POP+ACK message, counted by callgrind.
instructions: release
	@command -v valgrind >/dev/null 2>&1 || { \
		echo "make: installing valgrind"; \
		$(SUDO) apt-get update -qq && \
		$(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq valgrind; }
	DQ_SERVER=$(SERVER) scripts/instructions target/release/libdq.so

# Each cargo-fuzz target for FUZZ_SECS seconds; non-zero on a crash.
# (make test runs them for 10 s, and the 8-second soak in both test runs.)
fuzz: deps
	FUZZ_SECS=$(FUZZ_SECS) scripts/fuzz

# Chaos soak: kill -9 restarts under load for DQ_SOAK_SECS, on all four
# server lines.
soak: deps valkey debian13
	DQ_SOAK_SECS=$(DQ_SOAK_SECS) scripts/soak

# Sentinel failover under load: kill -9 of the master (and a SENTINEL
# FAILOVER from 60 s) while producers and consumers run, three sentinels
# watching; non-zero if a guarantee fails. (make test runs 15 s of it.)
failover: release
	DQ_FAILOVER_SECS=$(DQ_FAILOVER_SECS) DQ_SERVER=$(SERVER) scripts/failover

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all --check

# The Debian 13 root is root's (debootstrap made it): removed with sudo,
# never following a mount out of it.
clean:
	@[ ! -e $(DEBIAN13) ] && [ ! -e $(DEBIAN13).partial ] || \
		$(SUDO) rm -rf --one-file-system $(DEBIAN13) $(DEBIAN13).partial
	$(CARGO) clean
