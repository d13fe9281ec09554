# Granary: `make run` and `make test` work on a fresh Debian 12 machine as root.
BUILD ?= build
GENERATOR ?= Ninja
CMAKE_FLAGS ?=

.PHONY: all deps configure build run check test package test-unit test-asan test-tsan test-tsan-grpc bench bench-quick fuzz fuzz-smoke clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -G $(GENERATOR) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) > /dev/null

build: configure
	@cmake --build $(BUILD)

# A silo with the example grains (--examples), in the foreground (Ctrl-C
# stops it gracefully). Its gateway listens on 127.0.0.1:30000.
run: build
	$(BUILD)/bin/granary-silo --examples --data_dir=./granary-data

# The whole suite, TEST_JOBS tests at a time (default: one per core; each
# runs through scripts/test-launcher.sh), then every libFuzzer target for
# 10 s from its seeds (with clang; the first run builds build-fuzz/, which
# takes a while).
TEST_JOBS ?= $(shell nproc)
test: build
	cd $(BUILD) && ctest -j$(TEST_JOBS) --output-on-failure
	FUZZ_SECONDS=10 bash scripts/fuzz.sh

# What the machine enforces of the conventions (scripts/check.sh): every
# C++ file clang-format clean, no C++ or Python file over 600 lines, the
# layering of the components. CI runs it before `make test`.
check: deps
	bash scripts/check.sh

# The Debian packages: $(BUILD)/granary_<version>_amd64.deb and
# granary-dev_<version>_amd64.deb (docs/deployment.md, docs/sdk.md).
package: build
	cd $(BUILD) && cpack -G DEB

# The fast loop: unit tests only (ctest labels: unit, integration, process).
test-unit: build
	cd $(BUILD) && ctest -j$(TEST_JOBS) --output-on-failure -L unit

# AddressSanitizer + UndefinedBehaviorSanitizer (Debug).
test-asan: deps
	@cmake --preset asan > /dev/null
	@cmake --build build-asan
	cd build-asan && ctest --output-on-failure

# ThreadSanitizer: the runtime is concurrent; run it before calling
# scheduler or messaging work done. Tests labelled `grpc` run a gRPC server
# and are left out: Debian's gRPC is built without TSan, so every object
# handed across its (invisible) synchronization is reported as a race.
test-tsan: deps
	@cmake --preset tsan > /dev/null
	@cmake --build build-tsan
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/scripts/tsan.supp" ctest --output-on-failure -LE grpc

# The gRPC-labelled tests under TSan too, keeping only the races whose two
# accesses are both in Granary's code (gRPC's own report by the thousand).
test-tsan-grpc: deps
	@cmake --preset tsan > /dev/null
	@cmake --build build-tsan
	bash scripts/tsan-grpc.sh

# Every benchmark arm (Granary hosted and remote, CAF, plain gRPC) in one
# command, then bench/RESULTS.md regenerated from their reports (~10 min).
bench: build
	bash bench/run_all.sh $(BUILD) full

# The same at a small size (~1 min); its report goes to the build directory.
bench-quick: build
	bash bench/run_all.sh $(BUILD) quick

# libFuzzer targets (clang, ASan+UBSan, build-fuzz/): each runs FUZZ_SECONDS
# on a copy of its seed corpus; any crash, leak or timeout fails. FUZZ_TARGETS
# picks some ("directory membership"); fuzz/README.md has the details.
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

# The same for 10 s per target.
fuzz-smoke: deps
	FUZZ_SECONDS=10 bash scripts/fuzz.sh

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
