# The two set-up commands of README.md: `make run` and `make test`. Each installs what is
# missing (Debian packages), builds, and goes. `make help` lists every target.
#
# Every CMake build here (plain, sanitizer, fuzz; the package and the image are made from the
# plain one) compiles through Debian's ccache where it is installed: one cache for every build
# tree and every clone on this machine, CCACHE_DIR [~/.cache/execbox-ccache] (CMakeLists.txt,
# EXECBOX_CCACHE).
BUILD ?= build
MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: help deps deps-run deps-test deps-all build run test unit openapi test-sanitize test-v2 examples bench bench-options \
	bench-http test-load bench-e2b bench-packages clean format install deb test-deb image test-image test-cluster

help: ## this list
	@awk -F':.*## ' '/^[a-z][a-z0-9-]*:.*## / {printf "  make %-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# What is installed, by what needs it (scripts/install-deps.sh): building, running the server,
# testing. A user who only builds installs no test tool.
deps: ## install what building needs (Debian packages; as root)
	@scripts/install-deps.sh build

deps-run: deps ## install what running needs too: the sandbox's Python stack
	@scripts/install-deps.sh run

deps-test: deps-run ## install what the tests need too (bubblewrap, wrk, jsonschema, ...)
	@scripts/install-deps.sh test

# Everything any target here needs, at once: CI installs it first (.ci/run), so that stages
# running side by side never wait for each other's apt-get.
deps-all: deps-test fuzz-deps ## install what every target needs (the VM, image, package and cluster stages too)
	@scripts/install-package-deps.sh
	@scripts/install-vm-deps.sh
	@scripts/install-image-deps.sh
	@scripts/install-cluster-deps.sh

$(BUILD)/Makefile: CMakeLists.txt
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null

build: deps $(BUILD)/Makefile ## install the build's dependencies and build (in BUILD [build])
	@cmake --build $(BUILD) -j $(JOBS)

run: build deps-run ## build, then start the server (execbox serve) on 127.0.0.1:8080
	@scripts/serve.sh $(BUILD)/execbox

examples: build deps-run ## run every program in examples/ through the sandbox
	@scripts/run-examples.sh $(BUILD)/execbox

test: build deps-test ## build, then every unit and end-to-end test (ctest; README's test command)
	@scripts/test.sh $(BUILD)

# The edit-compile-test loop: the tests labelled `unit` (tests/CMakeLists.txt), which need no
# jail, no root and no server. Builds first (only what changed).
unit: build ## build, then the unit tests alone (no jail, no root, no server; about a minute)
	@scripts/test.sh $(BUILD) -L '^unit$$'

# docs/openapi.json: the OpenAPI document a server with the built-in limits serves, checked in
# for review. It is built from the code (src/api/http/openapi.cc) and written by execbox-openapi, a
# generator of the build's own (never installed); a unit test (tests/unit/openapi_test.cc) fails
# when the file is not what the build serves.
openapi: build ## write docs/openapi.json from the code (after a change to the API)
	@$(BUILD)/src/api/http/execbox-openapi > docs/openapi.json.new && mv docs/openapi.json.new docs/openapi.json

# The VM stage (tests/vm, docs/testing.md "Pure cgroup v2"): Debian's own kernel under qemu, pure cgroup
# v2, the cgroup, namespace and Landlock paths as root and as a user with a delegated group, and
# in Docker-shaped containers (runc); then a second boot under Debian's own systemd, where the
# package's execbox.service runs for real.
test-v2: deb deps-test ## the VM stage: Debian's kernel under qemu, pure cgroup v2, and its systemd
	@scripts/install-vm-deps.sh
	@tests/vm/run.sh $(BUILD)
	@VM_GUEST=systemd-guest.sh VM_LOGS=out-service tests/vm/run.sh $(BUILD) $(CURDIR)/tests/vm/service.sh

# Every test that runs execbox's C++ code: not the agent's own Python tests nor the docs' links
# (they run none of it, and `make test` runs them), nor the older E2B SDK pair (the newer one
# drives the same server paths; `make test` runs both).
test-sanitize: deps-test ## build with ASan and UBSan (in build-asan) and run every test of the C++ code against it
	@$(MAKE) --no-print-directory BUILD=build-asan CMAKE_FLAGS="-DEXECBOX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" build
	@scripts/test.sh build-asan -E '^(agent_python\..*|docs_references|e2b_sdk\.old)$$'

# Installing (docs/deploy.md "Installing"): PREFIX/bin/execbox, PREFIX/libexec/execbox/execbox-worker,
# /etc/execbox/execbox.toml, the systemd units. The Debian package is the same tree.
PREFIX ?= /usr/local
install: build ## install into PREFIX [/usr/local] without the package
	@cmake --install $(BUILD) --prefix $(PREFIX)

deb: build ## the Debian package, BUILD/execbox_VERSION_amd64.deb
	@scripts/install-package-deps.sh
	@$(MAKE) -s $(BUILD)/deb.stamp
	@ls -1 $(CURDIR)/$(BUILD)/execbox_*.deb

# Packed again only when something it holds changed, so that stages running side by side (.ci/run)
# never rewrite the package another one is reading.
$(BUILD)/deb.stamp: $(BUILD)/execbox $(BUILD)/execbox-worker README.md $(wildcard docs/*.md) docs/openapi.json \
		scripts/python-packages.txt scripts/python-packages-full.txt $(shell find deploy -type f)
	@cd $(BUILD) && cpack -G DEB >/dev/null && touch deb.stamp

# The package for real on this machine: apt-get install, doctor and executions from /usr/bin,
# the service's user, systemd-analyze verify, remove with a server running, purge.
test-deb: deb deps-test ## the package installed, used, removed and purged on this machine
	@tests/package/deb_test.sh $(BUILD)

# The container image localhost/execbox:VERSION (deploy/container/Containerfile, the package
# inside) with podman; IMAGE_BASE=docker.io/library/debian:bookworm-slim takes the base from a
# registry, else it is made from Debian's mirror (mmdebstrap). docs/deploy.md "Container image".
image: deb ## the container image localhost/execbox:VERSION (podman)
	@scripts/install-image-deps.sh
	@scripts/build-image.sh $(BUILD)

# The image for real: doctor, executions and limits, the server, hardened and non-root runs, in
# containers with podman's default security (no --privileged).
test-image: image deps-test ## the image for real, in containers with podman's default security
	@tests/image/image_test.sh $(BUILD)

# Several instances behind nginx (tests/cluster, docs/deploy.md "Several instances behind nginx"): three
# servers on loopback behind Debian's nginx with deploy/nginx's routing and the Kubernetes
# router's configuration, as root.
test-cluster: build deps-test ## three servers on loopback behind Debian's nginx
	@scripts/install-cluster-deps.sh
	@tests/cluster/run.sh $(BUILD)

bench: build deps-test ## latency, throughput and memory against python3 -c, bwrap, a cold jail
	@$(BUILD)/execbox_bench $(BUILD)/execbox

bench-options: build deps-run ## which warm-path choices win on this machine
	@$(BUILD)/execbox_bench_options

bench-http: build deps-test ## the HTTP server under load (wrk)
	@bench/http_bench.sh $(BUILD)/execbox

test-load: build deps-test ## one key floods (64 at once: print(1), then a hostile mix) while another runs one at a time; not in CI (LOAD_SECONDS=60 each)
	@/usr/bin/python3 tests/load/fair_load.py $(BUILD)/execbox --seconds $(or $(LOAD_SECONDS),60)

bench-packages: build deps-test ## a wheelhouse's packages: installed, from a package set, in a session
	@/usr/bin/python3 bench/package_bench.py $(BUILD)/execbox

# E2B's SDK against the server (docs/e2b.md, "Using the E2B SDK"): its common calls beside /v1 and python3 -c.
bench-e2b: build deps-test ## E2B's SDK against the server, beside /v1 and python3 -c
	@bench/e2b_bench.sh $(BUILD)/execbox $(BUILD)

clean: ## remove the build trees (the compiler cache stays)
	rm -rf build build-asan build-fuzz

# Fuzzing (fuzz/, docs/testing.md "Fuzzing"): a clang build of its own in build-fuzz, then every target
# for FUZZ_SECONDS on a scratch copy of its corpus; fails on a crash, leak or timeout.
# FUZZ_JOBS targets run at once, each on one core.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_JOBS ?= 1
.PHONY: fuzz fuzz-build fuzz-deps

fuzz-deps: deps ## install clang 16 and its fuzzing runtime
	@scripts/install-fuzz-deps.sh

# A changed fuzz/clang.cmake needs a fresh cache: -C does not override entries already set.
$(FUZZ_BUILD)/Makefile: CMakeLists.txt fuzz/CMakeLists.txt fuzz/clang.cmake | fuzz-deps
	@rm -f $(FUZZ_BUILD)/CMakeCache.txt
	cmake -S . -B $(FUZZ_BUILD) -C fuzz/clang.cmake >/dev/null

fuzz-build: fuzz-deps $(FUZZ_BUILD)/Makefile ## build the libFuzzer targets (clang 16, in build-fuzz)
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers

fuzz: fuzz-build ## every fuzz target for FUZZ_SECONDS [60], FUZZ_JOBS [1] at a time
	@FUZZ_JOBS=$(FUZZ_JOBS) fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

format: ## clang-format every C++ source
	@find src tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i
