# The two commands a user needs: `make run` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
TOOLS := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)
# End-to-end tests call grpcurl through this variable (installed by scripts/install-deps.sh).
export GRPCURL := $(TOOLS)/grpcurl
SOURCES = $(shell git ls-files '*.h' '*.cc' 2>/dev/null)

.PHONY: deps configure build run test format format-check lint-proto clean

deps:
	@scripts/install-deps.sh
	@scripts/install-deploy-tools.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) >/dev/null

build: configure
	@cmake --build $(BUILD_DIR)

# Installs what is missing, builds, and runs the gateway with the embedded sandbox as its
# upstream; prints ready-to-paste grpcurl commands. Ctrl-C stops it.
run: build
	@$(BUILD_DIR)/inspection-gateway --sandbox $(RUN_ARGS)

# Installs what is missing, builds, checks formatting and the proto lint, runs every test.
test: build format-check lint-proto
	@ctest --test-dir $(BUILD_DIR) --output-on-failure -j2

format:
	@clang-format -i $(SOURCES)

format-check: deps
	@clang-format --dry-run --Werror $(SOURCES) && echo "format-check: ok"

lint-proto: deps
	@buf lint && echo "buf lint: ok"

clean:
	rm -rf $(BUILD_DIR)
