# The front door. `make serve` runs the server on the bundled model, `make test` runs every test
# that needs no GPU. `make deps` installs what is missing (tools/setup.sh).
BUILD ?= build
MODEL ?= models/dsv3-tiny
PORT ?= 8000
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
JOBS ?= $(shell nproc)
FUZZ_SECONDS ?= 120

.PHONY: deps configure build serve test test-sanitize fuzz clean

deps:
	@tools/setup.sh

$(BUILD)/build.ninja:
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

configure: $(BUILD)/build.ninja

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The bundled model behind the OpenAI API, its reasoning in reasoning_content.
serve: deps build
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
