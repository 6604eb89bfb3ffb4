# The front door. `make serve` builds what serving needs and runs the server on the bundled model
# (Ctrl-C stops it); `make test` runs every test that needs no GPU. `make deps` installs what is
# missing (tools/setup.sh).
BUILD ?= build
MODEL ?= models/dsv3-tiny
PORT ?= 8000
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 120
# Extra configure flags for $(BUILD), e.g. -DDSINFER_CUDA=OFF: no CUDA backend even where nvcc is found.
CMAKE_FLAGS ?=

.PHONY: deps configure build dsinfer serve test test-sanitize fuzz clean

deps:
	@tools/setup.sh

$(BUILD)/build.ninja:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

# Everything: the binary, every test, the benchmarks and tools.
build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The binary alone, with the libraries it links: no tests or benchmarks.
dsinfer: configure
	@cmake --build $(BUILD) -j $(JOBS) --target dsinfer

# The bundled model behind the OpenAI API, its reasoning in reasoning_content. SIGINT (Ctrl-C) or
# SIGTERM stops it: running requests get --shutdown-timeout (30 s) to finish; a second signal ends
# them at once.
serve: deps dsinfer
	@$(BUILD)/dsinfer serve --model $(MODEL) --served-model-name $(notdir $(MODEL)) --port $(PORT) \
	  --reasoning-parser deepseek-r1

# GPU tests (label "gpu") run on a GPU machine through scripts/gpu-test.sh, never here.
test: deps build test-sanitize
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE gpu

# Loader and tokenizer tests again under AddressSanitizer and UBSan (tests labelled "sanitize").
test-sanitize: deps
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDSINFER_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS) --target sanitize_tests
	@ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -L sanitize

# libFuzzer on the parsers of untrusted input, FUZZ_SECONDS each (clang).
fuzz: deps
	@cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSINFER_FUZZ=ON \
	  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers
	@tools/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
