# The two set-up commands of README.md: `make run` and `make test`. Each installs what is
# missing (Debian packages), builds, and goes.
BUILD ?= build
MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps build run test test-sanitize examples bench bench-options bench-http clean format

deps:
	@scripts/install-deps.sh

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/Makefile
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/serve.sh $(BUILD)/execbox

examples: build
	@scripts/run-examples.sh $(BUILD)/execbox

test: build
	@scripts/test.sh $(BUILD)

test-sanitize:
	@$(MAKE) --no-print-directory BUILD=build-asan CMAKE_FLAGS="-DEXECBOX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" build
	@cd build-asan && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: build
	@$(BUILD)/execbox_bench $(BUILD)/execbox

bench-options: build
	@$(BUILD)/execbox_bench_options

bench-http: build
	@bench/http_bench.sh $(BUILD)/execbox

clean:
	rm -rf build build-asan

format:
	@find src tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i
