# The two commands a newcomer needs (see README.md):
#   make run   - install the missing Debian packages for building and running
#                (scripts/install-deps.sh run), build pathd and pathctl, start
#                pathd on the demo world
#   make test  - install the test tools as well (install-deps.sh test), build
#                everything, run every test
# Plus: make test-sanitize (ASan+UBSan and TSan builds), make test-docker (the
# container image), make bench (vs peers), make bench-server (the server's own
# cost beside redis-server), make bench-agents (space-time reservations,
# issue 34; needs the Moving AI maps of ../shared), make bench-replicas (issue 32:
# replicas on one Redis vs a bare XADD and a standalone pathd), make fuzz (each libFuzzer target for
# FUZZ_SECONDS, docs/FUZZING.md), make docs (regenerate the outputs recorded
# in the docs from a live daemon, scripts/gen-docs.py), make cluster (Redis,
# HAProxy and REPLICAS pathd replicas on loopback, scripts/cluster.sh up;
# docs/OPERATIONS.md).
BUILD    ?= build
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CONFIG   ?= config/default.json
# The libFuzzer targets: clang, ASan+UBSan in the code under test too.
FUZZ_BUILD   ?= $(BUILD)-fuzz
FUZZ_SECONDS ?= 60
# The interpreter for scripts/gen-docs.py (Debian's, as the tests use).
PATHD_PYTHON ?= /usr/bin/python3

.PHONY: all deps deps-test deps-bench build build-test fuzz-build run test test-sanitize \
        test-docker bench bench-server bench-agents bench-replicas fuzz docs clean cluster

all: build

# Package sets: scripts/install-deps.sh says what each holds.
deps:
	@scripts/install-deps.sh run
deps-test:
	@scripts/install-deps.sh test
deps-bench:
	@scripts/install-deps.sh bench

# Configures the Release tree; $(1) is PATHD_BUILD_TESTS: AUTO builds the tests
# when cmocka is present, so a `make run` machine without the test tools
# still configures; ON requires them.
configure = cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DPATHD_BUILD_TESTS=$(1) >/dev/null

build: deps
	@$(call configure,AUTO)
	@cmake --build $(BUILD) -j $(JOBS)

build-test: deps-test
	@$(call configure,ON)
	@cmake --build $(BUILD) -j $(JOBS)

fuzz-build: deps-test
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DPATHD_SANITIZE=address -DPATHD_FUZZ=ON -DPATHD_BUILD_TESTS=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets

# Only the daemon and the CLI: the tests, benchmarks and client packages are
# left to `make test`.
run: deps
	@$(call configure,AUTO)
	@cmake --build $(BUILD) -j $(JOBS) --target pathd pathctl
	$(BUILD)/server/pathd --config $(CONFIG)

# Replicas behind HAProxy on one Redis, in $(BUILD)/cluster; haproxy and
# redis-server are in the test package set. Stop it with
# `scripts/cluster.sh down`.
REPLICAS ?= 3
cluster: deps-test
	@$(call configure,AUTO)
	@cmake --build $(BUILD) -j $(JOBS) --target pathd pathctl
	scripts/cluster.sh up --replicas $(REPLICAS) --dir $(BUILD)/cluster --pathd $(BUILD)/server/pathd

# Every test, then every fuzz target's corpus and regression inputs replayed
# once under ASan+UBSan (no fuzzing).
test: build-test fuzz-build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	ctest --test-dir $(FUZZ_BUILD) --output-on-failure -j $(JOBS) -L fuzz

# Unit and integration tests under ASan+UBSan; the threaded ones under TSan.
test-sanitize: deps-test
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DPATHD_SANITIZE=address -DPATHD_BUILD_TESTS=ON >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(CURDIR)/tests/ubsan.supp \
	  ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS) -L sanitize
	@cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=Debug -DPATHD_SANITIZE=thread -DPATHD_BUILD_TESTS=ON >/dev/null
	@cmake --build $(BUILD)-tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir $(BUILD)-tsan --output-on-failure -j $(JOBS) -L threaded

# The container image, built and run with podman/buildah (no Docker engine
# needed): see docs/DOCKER.md.
test-docker: build
	scripts/test-docker.sh $(BUILD)

bench: deps-bench build-test
	bench/run-bench.sh $(BUILD)

# Regenerates the command outputs recorded in the docs (blocks marked
# <!-- gen-docs -->) from this build's pathd on the demo config; the test
# docs_live fails until they are regenerated after a change of output.
docs: build-test
	$(PATHD_PYTHON) scripts/gen-docs.py --build $(BUILD)

# The server's own cost beside redis-server (issue 17's table; installs
# Debian's redis-server itself): docs/BENCHMARKS.md.
bench-server: build
	bench/server/bench-server.sh $(BUILD)

# Issue 34's reservations benchmark (500 agents on den520d and Berlin_0_256,
# 2000 on Berlin_0_1024, and the FindPath-alone baseline; every answer checked
# by tests/agents/check_plans.py), then the reserving runs again through a
# pathd it starts on a loopback port (--mode wire, the row beneath each
# scenario's; PD_AGENTS_WIRE=0 skips them): docs/BENCHMARKS.md. Needs the Moving AI
# maps in ../shared/benchmarks/movingai (skips without them);
# PD_AGENTS_SECONDS=60 shortens the game time.
bench-agents: build
	bench/agents/run.sh $(BUILD)

# Issue 32's replica targets (update ack vs a bare XADD, catch-up of 100,000
# updates, path throughput under 1,000 updates/s vs a standalone pathd), one
# run on loopback with its own redis-server (appendfsync always) and
# replicas: docs/BENCHMARKS.md, "Replicas on one Redis (issue 32)".
bench-replicas: build-test
	bench/replicas/bench-replicas.sh $(BUILD)

# Each fuzz target for FUZZ_SECONDS (make fuzz FUZZ_SECONDS=600).
fuzz: fuzz-build
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(FUZZ_BUILD)
