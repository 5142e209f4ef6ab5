# The two set-up commands of the README: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Asked when a recipe runs (after deps installed ninja), not when make reads this file.
GENERATOR = $$(command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps configure build run test unit clean format tidy asan tsan

all: build

deps:
	@ci/install-deps

# A configure that failed leaves CMakeCache.txt but no build file: run it again then.
configure: deps
	@if [ ! -f $(BUILD)/build.ninja ] && [ ! -f $(BUILD)/Makefile ]; then \
	  cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_FLAGS) >/dev/null; fi

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The main job: replay the seed's measurements on the simulator.
run: build
	@$(BUILD)/apps/rcxl-sim/rcxl-sim reproduce --out out/reproduce

# Every test: unit and simulator tests here, then the verbs tests in the SoftRoCE VM.
test: build
	@ci/run-tests $(BUILD)

clean:
	rm -rf $(BUILD)

format:
	@git ls-files '*.h' '*.cc' | xargs clang-format -i

# clang-tidy (.clang-tidy) over the non-test sources: minutes of CPU, so not in `make test`.
tidy: configure
	@ci/check-tidy -p $(BUILD) -j $(JOBS)

# Every ctest under ASan+UBSan with leak checks (build-asan; about an hour of
# CPU to build here, minutes to run): not in `make test`.
asan: deps
	@cmake -S . -B build-asan $(GENERATOR) -DRCXL_SANITIZE=ON >/dev/null
	@cmake --build build-asan -j $(JOBS)
	@cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest -j $(JOBS) --timeout 900 --output-on-failure

# The tests that run threads (thread runtime, TCP, agent threads, the binaries
# as processes) under ThreadSanitizer (build-tsan).
TSAN_TESTS := thread_strand_test tcp_transport_test thread_runtime_test echo_both_runtimes_test \
  agent_threads_test client_shared_directory_thread_test client_connectors_thread_test \
  directory_process_test \
  agent_process_test kv_process_test rcxl-agent rcxl-directory rcxl-kv rcxl-sim
tsan: deps
	@cmake -S . -B build-tsan $(GENERATOR) -DRCXL_TSAN=ON >/dev/null
	@cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)
	@cd build-tsan && ctest -j $(JOBS) --timeout 900 --output-on-failure -R \
	  'ThreadStrand|TcpTransport|ThreadRuntime|EchoBoth|AgentThreads|SharedDirectoryClient|OnThreads|DirectoryProcess|AgentProcess|KvProcess'
