# The two commands a user needs: `make run` and `make test`.
BUILD_DIR ?= build
BUILD_TYPE ?= Release
TOOLS := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)
# End-to-end tests call grpcurl through this variable (installed by scripts/install-deps.sh).
export GRPCURL := $(TOOLS)/grpcurl
SOURCES = $(shell git ls-files '*.h' '*.cc' 2>/dev/null)
# ccache (CMakeLists.txt uses it when installed) rewrites paths under this folder to relative
# ones, so every build folder and every checkout of the project share one cache.
export CCACHE_BASEDIR ?= $(CURDIR)
# The sanitizer and fuzz builds carry debug line tables (-g1), and ccache then hashes the
# build folder's absolute path too (hash_dir): without this, a CI clone in another folder
# would recompile them all (about 40 minutes on 2 cores) instead of reusing the entries.
export CCACHE_NOHASHDIR ?= true

.PHONY: deps deps-build configure build build-binaries run test test-sanitize test-tsan bench \
	fuzz clients format format-check lint-proto lint-functions clean

# Everything building and testing need (scripts/install-deps.sh, install-deploy-tools.sh).
deps:
	@scripts/install-deps.sh
	@scripts/install-deploy-tools.sh

# What building and running need, nothing of the tests (scripts/apt-packages.txt).
deps-build:
	@scripts/install-deps.sh --build-only

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DINSPECTION_GATEWAY_BUILD_TESTS=ON >/dev/null

build: configure
	@cmake --build $(BUILD_DIR)

# The two binaries only, configured without the tests.
build-binaries: deps-build
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) \
	  -DINSPECTION_GATEWAY_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(BUILD_DIR) --target inspection-gateway inspection-sandbox

# Installs what building and running need (not the test tools), builds the binaries, and
# runs the gateway with the embedded sandbox as its upstream; prints ready-to-paste grpcurl
# commands. Ctrl-C stops it.
run: build-binaries
	@$(BUILD_DIR)/inspection-gateway --sandbox $(RUN_ARGS)

# Installs what is missing, builds, checks formatting, the proto lint and the function
# length, runs every test.
test: build format-check lint-proto lint-functions
	@ctest --test-dir $(BUILD_DIR) --output-on-failure -j2

# Sanitizers (BUILD.md, "Sanitizers"), each in its own build folder, -O1, CI runs both after
# `make test`. scripts/run-sanitized-tests.sh sets the sanitizers' options and fails on any
# report, also from a gateway or sandbox process a test started; suppressions (third-party
# frames only, each with its reason) in tests/sanitizers/.
ASAN_BUILD_DIR ?= build-asan
TSAN_BUILD_DIR ?= build-tsan
# Not run under ASan, each for a stated reason:
#   HttpServerTest.TheListenerRetriesAcceptFailuresAndSaysSoMeanwhile and
#   HostileIngressTest.TheListenerOutlivesRunningOutOfFileDescriptors run the process out of
#     file descriptors; UBSan's vptr check then cannot probe memory (the sanitizer runtime
#     tests an address with a pipe) and reports Asio's scheduler as an invalid object.
#   deploy.manifests_rules_dockerfile checks the production image's packages against what
#     the binaries link; sanitizer builds link their runtimes (libasan8, libubsan1) too.
ASAN_EXCLUDE ?= ^(HttpServerTest\.TheListenerRetriesAcceptFailuresAndSaysSoMeanwhile|HostileIngressTest\.TheListenerOutlivesRunningOutOfFileDescriptors|deploy\.manifests_rules_dockerfile)$$
ASAN_CTEST_ARGS ?= -j2 $(if $(ASAN_EXCLUDE),-E '$(ASAN_EXCLUDE)')

# AddressSanitizer + UndefinedBehaviorSanitizer (LeakSanitizer included) over the whole ctest
# suite, the real binaries the tests start included; the first report fails the run.
test-sanitize: deps
	@cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DINSPECTION_GATEWAY_BUILD_TESTS=ON -DINSPECTION_GATEWAY_SANITIZE=address,undefined >/dev/null
	@cmake --build $(ASAN_BUILD_DIR)
	@scripts/run-sanitized-tests.sh $(ASAN_BUILD_DIR) address $(ASAN_CTEST_ARGS)

# ThreadSanitizer over the concurrency-heavy tests only (TSan runs 5-15 times slower): the
# HTTP server and both vendor transports (http_tests), caches and request coalescing
# (cache_tests), the idempotency stores (idempotency_tests), the reconciler
# (reconcile_tests), the vendor client and the caching caller (gateway_tests), and from
# integration_tests the event hub, the streams, the cache pipeline and the reconciler end to
# end. Only those binaries (and the gateway the integration tests start) are built.
TSAN_TARGETS := http_tests cache_tests idempotency_tests reconcile_tests gateway_tests \
	integration_tests inspection-gateway
# Not run under TSan: StreamingTest.AThousandSubscribersAllReceiveAFannedOutEvent opens 1,000
#   streams at once, and each stream's first write hands gRPC's interceptor batch and op set
#   between threads through libgrpc (not built with TSan): most runs report races whose top
#   frames are std::function and grpcpp header code inside InterceptorBatchMethodsImpl::
#   ProceedServer, which no suppression can name without also hiding our code that gRPC calls
#   from there. The other StreamingTest cases run the same reactors under TSan; the
#   thousand-stream case runs in `make test` and under ASan.
TSAN_EXCLUDE ?= ^StreamingTest\.AThousandSubscribersAllReceiveAFannedOutEvent$$
TSAN_CTEST_ARGS ?= -j2 -L '^(http_tests|cache_tests|idempotency_tests|reconcile_tests)$$' \
	--then -j2 -L '^gateway_tests$$' -R '^(VendorClient|CachingCaller)' \
	--then -j2 -L '^integration_tests$$' \
	  -R '^(EventHub|EventFilter|EventStreamReactor|Streaming|CachePipeline|Reconcile)Test\.' \
	  $(if $(TSAN_EXCLUDE),-E '$(TSAN_EXCLUDE)')
test-tsan: deps
	@cmake -S . -B $(TSAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DINSPECTION_GATEWAY_BUILD_TESTS=ON -DINSPECTION_GATEWAY_SANITIZE=thread >/dev/null
	@cmake --build $(TSAN_BUILD_DIR) --target $(TSAN_TARGETS)
	@scripts/run-sanitized-tests.sh $(TSAN_BUILD_DIR) thread $(TSAN_CTEST_ARGS)

# The performance targets of docs/design.md §9 (bench/README.md): h2load, wrk and a C++ stream
# client against the real binaries; exit code 1 when a target is missed. Run it on an idle
# machine. BENCH_ARGS="--only hop_latency --seconds 20" narrows it.
bench: build
	@scripts/install-bench-tools.sh
	@cmake --build $(BUILD_DIR) --target bench_fanout_client bench_hop_floor
	@.tools/venv/bin/python bench/run.py --build-dir $(BUILD_DIR) $(BENCH_ARGS)

# The libFuzzer targets of fuzz/ (BUILD.md, "Fuzzing"): installs clang-16 and libFuzzer
# (scripts/install-fuzz-deps.sh), builds them in $(FUZZ_BUILD_DIR) with clang (ASan, UBSan),
# replays the committed corpora, then runs each target for FUZZ_SECONDS, one at a time;
# exit code 1 on any crash, leak, timeout or out-of-memory. FUZZ_TARGETS="config" narrows it.
FUZZ_SECONDS ?= 60
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_TARGETS ?=
fuzz:
	@scripts/install-fuzz-deps.sh
	@cmake -S . -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_CXX_COMPILER=clang++-16 \
	  -DINSPECTION_GATEWAY_FUZZ=ON -DINSPECTION_GATEWAY_BUILD_TESTS=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD_DIR) --target fuzzers
	@scripts/run-fuzzers.sh --replay $(FUZZ_BUILD_DIR)
	@scripts/run-fuzzers.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Client code for Go, Python, Java and TypeScript and a descriptor set, into clients/
# (README, "Using the API from another language").
clients: deps
	@scripts/make-clients.sh

format:
	@clang-format -i $(SOURCES)

format-check: deps
	@clang-format --dry-run --Werror $(SOURCES) && echo "format-check: ok"

# No production function longer than LIZARD_MAX_LENGTH lines (lizard's "length": the
# function's lines, signature and braces included): a longer one is split where its steps are.
# The composition root (gateway/server/gateway_server.cc: Start, Shutdown) stays on a
# screen: LIZARD_ROOT_MAX_LENGTH.
LIZARD_MAX_LENGTH ?= 120
LIZARD_ROOT_MAX_LENGTH ?= 60
lint-functions: deps
	@.tools/venv/bin/lizard --length $(LIZARD_MAX_LENGTH) --CCN 1000 --arguments 100 \
	  --warnings_only gateway adapters sandbox && \
	  .tools/venv/bin/lizard --length $(LIZARD_ROOT_MAX_LENGTH) --CCN 1000 --arguments 100 \
	  --warnings_only gateway/server/gateway_server.cc && \
	  echo "lint-functions: ok (<= $(LIZARD_MAX_LENGTH) lines; the composition root <= $(LIZARD_ROOT_MAX_LENGTH))"

# buf lint (STANDARD), and buf breaking against the last release's image: inspection.v1
# only grows (README, "The API"; a new release adds its image to proto/releases/).
lint-proto: deps
	@buf lint && echo "buf lint: ok"
	@buf breaking --against $$(ls proto/releases/inspection-v1-*.binpb.gz | sort -V | tail -1) \
	  && echo "buf breaking: ok"

clean:
	rm -rf $(BUILD_DIR)
