# dq: build, run and test the module. `make run` and `make test` work on a
# fresh Debian machine: they install what is missing first.

CARGO   ?= cargo
SERVER  ?= redis-server
PORT    ?= 6379
RUN_DIR := target/run
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

VALKEY  ?= valkey-server
QUICK   ?=
FUZZ_SECS    ?= 60
DQ_SOAK_SECS ?= 180

.PHONY: all deps valkey build release install run test examples bench instructions fuzz soak clippy fmt clean relay

all: release relay

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

build: deps
	$(CARGO) build

release: deps
	$(CARGO) build --release

# The HTTP relay (relay/, on the consume loop in client/): target/release/dq-relay.
relay: deps
	$(CARGO) build --release -p dq-relay

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

# Unit tests, then integration tests against real servers that the tests
# start on free loopback ports and always stop: once on redis-server, once
# on valkey-server.
test: build valkey
	$(CARGO) test
	DQ_SERVER=$(VALKEY) $(CARGO) test --test '*'
	$(CARGO) test -p dq-client -p dq-relay
	DQ_SERVER=$(VALKEY) $(CARGO) test -p dq-relay --test '*'
	scripts/test-examples
	FUZZ_SECS=10 scripts/fuzz

# The client examples (Python redis-py, Node.js ioredis, Rust redis crate)
# against a real server; installs redis-py into a venv and ioredis from the
# lockfile first (nodejs/npm/python3-venv from apt when missing).
examples: build
	scripts/test-examples

# Benchmark: dq beside the client-side designs it replaces, on servers it
# starts itself. QUICK=1 runs in under a minute. Writes
# target/bench/results.md and target/bench/lateness.svg.
bench: release
	DQ_BENCH_QUICK=$(QUICK) DQ_SERVER=$(SERVER) $(CARGO) bench --bench dq
	DQ_BENCH_QUICK=$(QUICK) DQ_SERVER=$(SERVER) $(CARGO) bench -p dq-relay --bench relay

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

# Chaos soak: kill -9 restarts under load for DQ_SOAK_SECS, on both servers.
soak: deps valkey
	DQ_SOAK_SECS=$(DQ_SOAK_SECS) scripts/soak

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all --check

clean:
	$(CARGO) clean
