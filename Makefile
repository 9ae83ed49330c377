# ContentStore — the two commands: `make test` and `make run`. Everything else is optional.
SWIFT        ?= swift
APT_PACKAGES := libzstd-dev libssl-dev pkg-config
STORE        ?= $(or $(CONTENTSTORE_PATH),./contentstore-data)

.PHONY: deps build release test run clean bench compare compare-cluster scale consumer-check cluster-services-start cluster-services-stop

# Installs the C libraries through apt when pkg-config cannot find them (fresh Debian machines).
deps:
	@if ! command -v pkg-config >/dev/null 2>&1 || ! pkg-config --exists libzstd libcrypto; then \
		echo "Installing $(APT_PACKAGES) ..."; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_PACKAGES); \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

# The cluster tests run against real PostgreSQL and S3 servers (Scripts/cluster-services.sh installs
# and starts them on 127.0.0.1 in a scratch folder of this checkout's own); they are stopped on
# success, failure and interruption alike.
CLUSTER_SERVICES := Scripts/cluster-services.sh
POOL_TEST        := waitingWritersLeaveTheCooperativePoolFree|waitingArchiveCallsLeaveTheCooperativePoolFree
# swift test with the engine's info-level log lines kept in .build/test.log instead of on the terminal,
# and the failures repeated at the end.
QUIET_TEST       := Scripts/swift-test-quiet.sh
CLUSTER_DIR      ?= /tmp/contentstore-cluster-$(shell printf '%s' '$(CURDIR)' | cksum | cut -d' ' -f1)

# The backend example builds under the root's .build (ignored by git, removed by `make clean`). Its
# cached build plan (description.json) is removed first: SwiftPM reuses it without noticing a source
# file the root package, a path dependency of the example, gained since, and the build then fails
# with "cannot find X in scope" in a warm tree (a fresh clone has no plan). Planning again takes
# about a second.
EXAMPLE_BUILD      := $(CURDIR)/.build/backend-example
STALE_EXAMPLE_PLAN := $(EXAMPLE_BUILD)/*/description.json

test: deps
	$(SWIFT) build --build-tests
	@trap '$(CLUSTER_SERVICES) stop "$(CLUSTER_DIR)"' EXIT INT TERM; \
		$(CLUSTER_SERVICES) start "$(CLUSTER_DIR)" && . "$(CLUSTER_DIR)/env" && \
		SWIFT=$(SWIFT) $(QUIET_TEST) --skip-build --skip '$(POOL_TEST)'
	@# The tests that the cooperative pool stays free while writers wait (Store's and DataArchive's)
	@# need every thread of the pool at one moment, which the other tests' tasks take, so they run in a
	@# process of their own. (Tests that block run on threads of their own: Docs/testing.md.)
	SWIFT=$(SWIFT) TEST_LOG=.build/test-pool.log $(QUIET_TEST) --skip-build --filter '$(POOL_TEST)'
	@# The event count's other path (condition variable: macOS and systems without a futex), on Linux too.
	mkdir -p .build
	$(CC) -O2 -Wall -Wextra -DCS_EVENT_CONDVAR -ISources/CContentStoreSupport/include -o .build/eventcount-condvar-stress \
		Tests/Portability/eventcount_condvar_stress.c Sources/CContentStoreSupport/eventcount.c -lpthread
	.build/eventcount-condvar-stress
	$(MAKE) consumer-check
	@# The backend example (Examples/BackendExample: Hummingbird on the async API) builds.
	rm -f $(STALE_EXAMPLE_PLAN)
	$(SWIFT) build --package-path Examples/BackendExample --scratch-path "$(EXAMPLE_BUILD)"

# A scratch package depending on a tagged clone of this repository (file:// URL, `from:`) resolves
# and builds: ContentStore works as a versioned dependency (no unsafeFlags). Checks the committed HEAD.
consumer-check:
	SWIFT=$(SWIFT) Tests/Packaging/consumer-check.sh

run: release
	$(SWIFT) run -c release --skip-build contentstore demo --store "$(STORE)"

clean:
	rm -rf .build

# For running the cluster tests by hand: start the services, then
#   eval "$$(Scripts/cluster-services.sh env $(CLUSTER_DIR))"; swift test --filter ContentStoreClusterTests
cluster-services-start:
	$(CLUSTER_SERVICES) start "$(CLUSTER_DIR)"
cluster-services-stop:
	$(CLUSTER_SERVICES) stop "$(CLUSTER_DIR)"

# Garbage-collection soak: writers, snapshot readers and a collector together for
# SOAK_SECONDS (default 300), then the kill -9 crash test for CRASH_SECONDS (default 120).
SOAK_SECONDS  ?= 300
CRASH_SECONDS ?= 120
.PHONY: gc-soak
gc-soak: deps
	$(SWIFT) build --build-tests
	CONTENTSTORE_SOAK_SECONDS=$(SOAK_SECONDS) $(SWIFT) test --skip-build --filter GarbageCollectionSoakTests
	CONTENTSTORE_CRASH_SECONDS=$(CRASH_SECONDS) $(SWIFT) test --skip-build --filter GarbageCollectionCrashTests

# ── Benchmarks: a separate package in Benchmarks/, never built by `make test` ──────────────────
# `make bench`: the ordo-one suites (Benchmarks/Benchmarks/<Name>/); BENCH_ARGS="--target BlobsBenchmarks" etc.
# `make compare`: ContentStore side by side with SQLite, file-per-key, restic and git, plus the
# machine's limits; Warehouse and DataArchive against the originals' file layouts; versions of a
# large file against restic and borg. Writes Docs/benchmarks/latest.{md,json,svg}; then runs
# `make compare-cluster` (below), which adds the cluster section.
# COMPARE_ARGS="--corpus-mb 50" etc. (`compare --help`).
BENCH_ARGS   ?=
COMPARE_ARGS ?=
# SwiftPM reuses the build plan it cached (description.json) without always noticing a source file
# added to the engine, a path dependency (`../`) of Benchmarks/: the build then fails with "cannot
# find X in scope". Removing the cached plan has it planned again, which takes about a second.
STALE_BENCH_PLAN := Benchmarks/.build/*/description.json

bench: deps
	rm -f $(STALE_BENCH_PLAN)
	cd Benchmarks && $(SWIFT) package benchmark --no-progress $(BENCH_ARGS)

compare: deps
	@if ! command -v restic >/dev/null 2>&1 || ! command -v git >/dev/null 2>&1 || ! command -v borg >/dev/null 2>&1; then \
		echo "Installing restic, git and borg for the comparison ..."; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		( $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq restic git borgbackup ) \
			|| echo "Could not install restic/git/borg; the comparison skips what is missing and says why."; \
	fi
	rm -f $(STALE_BENCH_PLAN)
	cd Benchmarks && $(SWIFT) build -c release --product compare
	cd Benchmarks && ./.build/release/compare --output ../Docs/benchmarks $(COMPARE_ARGS)
	$(MAKE) compare-cluster

# `make compare-cluster`: issue 17's cluster targets alone (also the last step of `make compare`):
# ContentStoreCluster against plain PostgreSQL (16 writers in 4 processes) and `restic backup` to the
# same S3 server, 4 KiB point reads from a second instance, instance memory at two cluster sizes.
# Starts its own PostgreSQL and S3 gateway in CLUSTER_COMPARE_DIR (free ports) and stops them even
# on failure; writes Docs/benchmarks/cluster.{md,json} and its section of latest.md.
# CLUSTER_COMPARE_ARGS="--rounds 5 --commit-seconds 10" etc. (`cluster-compare --help`).
CLUSTER_COMPARE_ARGS ?=
CLUSTER_COMPARE_DIR  ?= /tmp/contentstore-cluster-compare-$(shell printf '%s' '$(CURDIR)' | cksum | cut -d' ' -f1)
compare-cluster: deps
	@command -v restic >/dev/null 2>&1 || { SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		( $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq restic ) \
		|| echo "Could not install restic; the cluster comparison runs its ingest without it and says so."; }
	rm -f $(STALE_BENCH_PLAN)
	cd Benchmarks && $(SWIFT) build -c release --product cluster-compare
	@trap '$(CURDIR)/$(CLUSTER_SERVICES) stop "$(CLUSTER_COMPARE_DIR)"' EXIT INT TERM; \
		cd Benchmarks && ./.build/release/cluster-compare --output ../Docs/benchmarks \
		--services-dir "$(CLUSTER_COMPARE_DIR)" --services-script $(CURDIR)/$(CLUSTER_SERVICES) $(CLUSTER_COMPARE_ARGS)

# `make scale`: issue 19's million-object targets (open time, resident memory per blob+record, gc of
# 10,000 garbage blobs in a 100k and a 1M store), every round printed. The stores are built once and
# cached in Benchmarks/.build/scale-stores. SCALE_ARGS="--rounds 5" etc.
SCALE_ARGS ?=
scale: deps
	rm -f $(STALE_BENCH_PLAN)
	cd Benchmarks && $(SWIFT) build -c release --product scale
	cd Benchmarks && ./.build/release/scale $(SCALE_ARGS)

# Reliability (Docs/reliability.md).
# Each run prints `reliability:` lines with its counts and records them as JSON in
# .build/debug/reliability/ (Fuzz/.build-fuzz/reliability/ for fuzz).
# crash-soak: the process-crash test with CRASH_KILLS SIGKILLs (default 10,000; CI runs 200) from
# seed CRASH_SEED (default 1: the workloads and kill delays; a failure names its seed and run).
CRASH_KILLS ?= 10000
CRASH_SEED  ?= 1
.PHONY: crash-soak fuzz sanitize
crash-soak: deps
	$(SWIFT) build --build-tests
	RELIABILITY_CRASH_KILLS=$(CRASH_KILLS) RELIABILITY_CRASH_SEED=$(CRASH_SEED) $(SWIFT) test --skip-build --filter ProcessCrashTests

# reliability-report: every power-cut sweep (recovery's own syncs too), the I/O-fault sweep, the
# crash test with CRASH_KILLS kills from CRASH_SEED, and fuzzing for FUZZ_SECONDS per target (0 skips
# it); then regenerates the table under "Counts" in Docs/reliability.md from the JSON the runs write,
# naming the commit they ran on. Logs in .build/reliability-report/logs/.
.PHONY: reliability-report
reliability-report: deps
	python3 Tests/ReliabilityReport/reliability_report.py --swift "$(SWIFT)" --kills $(CRASH_KILLS) --seed $(CRASH_SEED) --fuzz-seconds $(FUZZ_SECONDS)

# fuzz: each libFuzzer target (WAL segment, checkpoint, pack) for FUZZ_SECONDS (default 60).
FUZZ_SECONDS ?= 60
fuzz: deps
	FUZZ_SECONDS=$(FUZZ_SECONDS) Fuzz/fuzz.sh

# sanitize: the whole test suite under ThreadSanitizer, then AddressSanitizer, each in a scratch
# directory of its own, with the cluster test services up (as `make test`; stopped on success,
# failure and interruption). -DCONTENTSTORE_TSAN swaps in a Mutex ThreadSanitizer can see through
# (TSanVisibleMutex.swift); LeakSanitizer is off (Foundation leaks a page per empty file read, and
# it cannot follow Swift's tagged enum payloads), AddressSanitizer's memory checks are on.
# The tests that need the whole cooperative pool (POOL_TEST) run in a process of their own, as in
# `make test`: beside the others they fail, sanitized or not. Nothing is skipped under
# ThreadSanitizer. Under AddressSanitizer two tests are, because the sanitizer changes what they
# measure: they bound the peak RSS of a streamed put and export (a `contentstore` child; a cluster
# put in this process), and AddressSanitizer's quarantine (256 MiB) keeps what the put frees out of
# reuse, so the peak grows with the file, the very thing the tests catch (a 256 MiB put: 416 MiB
# above a 1 KiB one, 31 MiB with quarantine_size_mb=0).
ASAN_SKIP := streamingPutAndExportOf256MiBStayBounded|aFileMuchLargerThanMemoryBoundsStreamsThroughPutAndExport
sanitize: deps
	@echo "make sanitize skips $(ASAN_SKIP) under AddressSanitizer: its quarantine keeps what a put frees, so a streamed put's peak RSS grows with the file"
	$(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan -Xswiftc -DCONTENTSTORE_TSAN
	$(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan
	@trap '$(CLUSTER_SERVICES) stop "$(CLUSTER_DIR)"' EXIT INT TERM; \
		$(CLUSTER_SERVICES) start "$(CLUSTER_DIR)" && . "$(CLUSTER_DIR)/env" && \
		$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan -Xswiftc -DCONTENTSTORE_TSAN --skip '$(POOL_TEST)' && \
		$(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan -Xswiftc -DCONTENTSTORE_TSAN --filter '$(POOL_TEST)' && \
		ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --skip '$(ASAN_SKIP)|$(POOL_TEST)' && \
		ASAN_OPTIONS=detect_leaks=0 $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan --filter '$(POOL_TEST)'
