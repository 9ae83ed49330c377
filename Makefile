# ContentStore — the two commands: `make test` and `make run`. Everything else is optional.
SWIFT        ?= swift
APT_PACKAGES := libzstd-dev libssl-dev pkg-config
STORE        ?= $(or $(CONTENTSTORE_PATH),./contentstore-data)

.PHONY: deps build release test run clean bench compare

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

test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

run: release
	$(SWIFT) run -c release --skip-build contentstore demo --store "$(STORE)"

clean:
	rm -rf .build
