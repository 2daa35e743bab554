# The two commands a newcomer needs (see README.md):
#   make run   - install missing Debian packages, build, start pathd on the demo world
#   make test  - same bootstrap, build, run every test
# Plus: make test-sanitize (ASan+UBSan and TSan builds), make test-docker (the
# container image), make bench (vs peers), make bench-server (the server's own
# cost beside redis-server), make fuzz (each libFuzzer target for
# FUZZ_SECONDS, docs/FUZZING.md).
BUILD    ?= build
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
CONFIG   ?= config/default.json
# The libFuzzer targets: clang, ASan+UBSan in the code under test too.
FUZZ_BUILD   ?= $(BUILD)-fuzz
FUZZ_SECONDS ?= 60

.PHONY: all deps build fuzz-build run test test-sanitize test-docker bench bench-server fuzz clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

fuzz-build: deps
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DPATHD_SANITIZE=address -DPATHD_FUZZ=ON >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets

run: build
	$(BUILD)/server/pathd --config $(CONFIG)

# Every test, then every fuzz target's corpus and regression inputs replayed
# once under ASan+UBSan (no fuzzing).
test: build fuzz-build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	ctest --test-dir $(FUZZ_BUILD) --output-on-failure -j $(JOBS) -L fuzz

# Unit and integration tests under ASan+UBSan; the threaded ones under TSan.
test-sanitize: deps
	@cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DPATHD_SANITIZE=address >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:suppressions=$(CURDIR)/tests/ubsan.supp \
	  ctest --test-dir $(BUILD)-asan --output-on-failure -j $(JOBS) -L sanitize
	@cmake -S . -B $(BUILD)-tsan -DCMAKE_BUILD_TYPE=Debug -DPATHD_SANITIZE=thread >/dev/null
	@cmake --build $(BUILD)-tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  ctest --test-dir $(BUILD)-tsan --output-on-failure -j $(JOBS) -L threaded

# The container image, built and run with podman/buildah (no Docker engine
# needed): see docs/DOCKER.md.
test-docker: build
	scripts/test-docker.sh $(BUILD)

bench: build
	bench/run-bench.sh $(BUILD)

# The server's own cost beside redis-server (issue 17's table; installs
# Debian's redis-server itself): docs/BENCHMARKS.md.
bench-server: build
	bench/server/bench-server.sh $(BUILD)

# Each fuzz target for FUZZ_SECONDS (make fuzz FUZZ_SECONDS=600).
fuzz: fuzz-build
	tests/fuzz/run-fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(FUZZ_BUILD)
