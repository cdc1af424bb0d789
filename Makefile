# matrix-cpp: the two commands a user needs are `make demo` and `make test`.
# Both install missing Debian packages first, then configure and build.

PACKAGES := cmake g++ make ninja-build pkg-config ccache \
            libabsl-dev libprotobuf-dev protobuf-compiler libspdlog-dev \
            libgtest-dev libgmock-dev libbenchmark-dev \
            libglib2.0-dev libgtk-3-dev xvfb xauth \
            libuv1-dev \
            libsdl2-dev libgl-dev libegl-dev libgl1-mesa-dri
PACKAGES += mesa-utils gtk-3-examples
PACKAGES += qt6-base-dev
# tests/agent renderer_e2e_test: Qt Quick (qml runtime), GTK 4, an SDL 2 GL game
PACKAGES += qml-qt6 qml6-module-qtquick qml6-module-qtquick-window qml6-module-qtqml-workerscript
# tests/agent qml_program_e2e_test: the QtQml types (Timer) the qml runtime loads
# (QML frames, docs/stacks.md).
PACKAGES += qml6-module-qtqml qml6-module-qtqml-models
# QML frames: Qt 6.4.2's private headers for tracers_qv4_642_layout_check.
PACKAGES += qt6-declarative-private-dev
PACKAGES += gtk-4-examples chromium-bsu
# tests/agent vulkan_e2e_test: vkcube on Mesa's software Vulkan driver (lavapipe),
# and vulkan_target (built with the Vulkan and XCB headers, links neither Vulkan nor GL).
PACKAGES += vulkan-tools mesa-vulkan-drivers libvulkan-dev libxcb1-dev
# matrix-report html: the browser test (tests/tools, label browser).
PACKAGES += chromium
# The timeline e2e test checks the exported trace with node (tests/e2e/timeline_check.js).
PACKAGES += nodejs
# Source lines in symbolized stacks (elfutils' libdw, docs/stacks.md).
PACKAGES += libdw-dev
# tests/agent tk_program_e2e_test: a tkinter program (Tcl/Tk waits without poll).
PACKAGES += python3-tk
# tests/agent pcmanfm_e2e_test: a file manager loading a big folder (GLib idle work).
PACKAGES += pcmanfm
# tests/agent startup_window_e2e_test: a GL benchmark that loads libGL after its
# first poll, and the X client library headers for its map_watcher.
PACKAGES += glmark2-x11 libx11-dev
# tests/agent mpv_e2e_test: a video player presenting a steady 30 fps from its
# render thread.
PACKAGES += mpv
# Python frames (docs/stacks.md): CPython 3.11's headers and libpython for
# tracers_python311_layout_check and tracers_python_frames_embedded_test.
PACKAGES += python3.11-dev
# tests/agent frozen_frame_e2e_test: a GTK 4 program of ours (agent_gtk4_target).
PACKAGES += libgtk-4-dev
# matrix-report push/fleet: ClickHouse's HTTP interface through libcurl; the
# fleet tests (tests/tools, label fleet) start their own clickhouse-server.
PACKAGES += clickhouse-server clickhouse-client libcurl4-openssl-dev
# matrix-report push: JSON lines parsed with simdjson (docs/fleet.md, "Pushing").
PACKAGES += libsimdjson-dev
# Instruction counts of the hot path (tests/bench bench_dispatch_cost_ceiling,
# docs/performance.md): callgrind.
PACKAGES += valgrind
# matrix-report symbolize/push --debuginfod: elfutils' debuginfod client
# (libdebuginfod, linked into matrix-report only); the symbolize tests
# (tests/tools) start Debian's debuginfod server on loopback.
PACKAGES += libdebuginfod-dev debuginfod
CLANG_PACKAGES := clang libclang-rt-14-dev

JOBS ?= $(shell nproc)
BUILD ?= build
CMAKE_FLAGS ?=
DEMO_ARGS ?=

.PHONY: demo demo-runtimes test deps build test-asan test-tsan bench bench-peers package install clean

demo: build
	cd $(CURDIR) && ./$(BUILD)/samples/demo/matrix-demo $(DEMO_ARGS)

# matrix-run on a Python and a node program: hangs keyed by their own
# function, with Python and JavaScript frames by name (samples/runtimes).
demo-runtimes: build
	cd $(CURDIR) && ./samples/runtimes/run.sh $(BUILD)

# tools/run-tests.sh: unit tests once; end-to-end tests (label e2e) retried once
# on failure, and every test that needed its retry named at the end.
test: build
	JOBS=$(JOBS) ./tools/run-tests.sh $(BUILD)

deps:
	@./tools/install-deps.sh $(PACKAGES)

build: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# The clang build: checked lock annotations (-Wthread-safety) plus
# AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan:
	@./tools/install-deps.sh $(PACKAGES) $(CLANG_PACKAGES)
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DMATRIX_SANITIZE=address,undefined -DMATRIX_BUILD_BENCHMARKS=OFF
	cmake --build build-asan -j $(JOBS)
	JOBS=$(JOBS) ./tools/run-tests.sh build-asan no-sanitizer

test-tsan:
	@./tools/install-deps.sh $(PACKAGES) $(CLANG_PACKAGES)
	cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DMATRIX_SANITIZE=thread -DMATRIX_BUILD_BENCHMARKS=OFF
	cmake --build build-tsan -j $(JOBS)
	JOBS=$(JOBS) ./tools/run-tests.sh build-tsan no-sanitizer

# Benchmarks against the budgets in docs/performance.md.
bench: build
	./$(BUILD)/tests/bench/matrix_bench --benchmark_min_time=0.2

# Method tracing per call against LTTng-UST's cyg-profile and uftrace, when
# installed (optional: apt-get install -y uftrace liblttng-ust-dev lttng-tools).
bench-peers:
	cmake --build $(BUILD) -j $(JOBS) --target matrix_bench
	./tools/bench-peers.sh $(BUILD)

# A .deb of the libraries, headers, CMake package, pkg-config file and
# matrix-report: build/packages/matrix-cpp-dev_<version>_<arch>.deb.
package: build
	cmake --build $(BUILD) --target package

# Installs into PREFIX (default /usr/local): see docs/integration.md.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-asan build-tsan
