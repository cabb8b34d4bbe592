# The two set-up commands of README.md: `make run` and `make test`. Each installs what is
# missing (Debian packages), builds, and goes.
BUILD ?= build
MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: deps build run test test-sanitize test-v2 examples bench bench-options bench-http bench-e2b bench-packages clean format \
	install deb test-deb image test-image test-cluster

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

# The VM stage (tests/vm, README "Pure cgroup v2"): Debian's own kernel under qemu, pure cgroup
# v2, the cgroup, namespace and Landlock paths as root and as a user with a delegated group, and
# in Docker-shaped containers (runc); then a second boot under Debian's own systemd, where the
# package's execbox.service runs for real.
test-v2: deb
	@scripts/install-vm-deps.sh
	@tests/vm/run.sh $(BUILD)
	@VM_GUEST=systemd-guest.sh VM_LOGS=out-service tests/vm/run.sh $(BUILD) $(CURDIR)/tests/vm/service.sh

test-sanitize:
	@$(MAKE) --no-print-directory BUILD=build-asan CMAKE_FLAGS="-DEXECBOX_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug" build
	@cd build-asan && ctest --output-on-failure -j $(JOBS) --timeout 600

# Installing (README "Installing"): PREFIX/bin/execbox, PREFIX/libexec/execbox/execbox-worker,
# /etc/execbox/execbox.toml, the systemd units. The Debian package is the same tree.
PREFIX ?= /usr/local
install: build
	@cmake --install $(BUILD) --prefix $(PREFIX)

deb: build
	@scripts/install-package-deps.sh
	@cd $(BUILD) && cpack -G DEB >/dev/null && ls -1 $(CURDIR)/$(BUILD)/execbox_*.deb

# The package for real on this machine: apt-get install, doctor and executions from /usr/bin,
# the service's user, systemd-analyze verify, remove with a server running, purge.
test-deb: deb
	@tests/package/deb_test.sh $(BUILD)

# The container image localhost/execbox:VERSION (deploy/container/Containerfile, the package
# inside) with podman; IMAGE_BASE=docker.io/library/debian:bookworm-slim takes the base from a
# registry, else it is made from Debian's mirror (mmdebstrap). README "Container image".
image: deb
	@scripts/install-image-deps.sh
	@scripts/build-image.sh $(BUILD)

# The image for real: doctor, executions and limits, the server, hardened and non-root runs, in
# containers with podman's default security (no --privileged).
test-image: image
	@tests/image/image_test.sh $(BUILD)

# Several instances behind nginx (tests/cluster, README "Several instances behind nginx"): three
# servers on loopback behind Debian's nginx with deploy/nginx's routing and the Kubernetes
# router's configuration, as root.
test-cluster: build
	@scripts/install-cluster-deps.sh
	@tests/cluster/run.sh $(BUILD)

bench: build
	@$(BUILD)/execbox_bench $(BUILD)/execbox

bench-options: build
	@$(BUILD)/execbox_bench_options

bench-http: build
	@bench/http_bench.sh $(BUILD)/execbox

# E2B's SDK against the server (README, "Using the E2B SDK"): its common calls beside /v1 and python3 -c.
bench-packages: build
	@/usr/bin/python3 bench/package_bench.py $(BUILD)/execbox

bench-e2b: build
	@bench/e2b_bench.sh $(BUILD)/execbox $(BUILD)

clean:
	rm -rf build build-asan

# Fuzzing (fuzz/, README "Fuzzing"): a clang build of its own in build-fuzz, then every target
# for FUZZ_SECONDS on a scratch copy of its corpus; fails on a crash, leak or timeout.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
.PHONY: fuzz fuzz-build fuzz-deps

fuzz-deps: deps
	@scripts/install-fuzz-deps.sh

# A changed fuzz/clang.cmake needs a fresh cache: -C does not override entries already set.
$(FUZZ_BUILD)/Makefile: CMakeLists.txt fuzz/CMakeLists.txt fuzz/clang.cmake | fuzz-deps
	@rm -f $(FUZZ_BUILD)/CMakeCache.txt
	cmake -S . -B $(FUZZ_BUILD) -C fuzz/clang.cmake >/dev/null

fuzz-build: fuzz-deps $(FUZZ_BUILD)/Makefile
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers

fuzz: fuzz-build
	@fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

format:
	@find src tests bench -name '*.cc' -o -name '*.h' | xargs clang-format -i
