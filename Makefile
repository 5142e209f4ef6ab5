# The two set-up commands of the README: `make run` and `make test`.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
GENERATOR := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")

.PHONY: all deps configure build run test unit clean format tidy

all: build

deps:
	@ci/install-deps

configure: deps
	@if [ ! -f $(BUILD)/CMakeCache.txt ]; then cmake -S . -B $(BUILD) $(GENERATOR) $(CMAKE_FLAGS) >/dev/null; fi

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
