# Two entry points for a fresh Linux host with only python3 and pip: `make demo` and `make test` (which
# also installs the headless Chromium its page-rendering tests need, or stops naming it).
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif
RUN := $(UV) run --frozen
PYTEST_ARGS ?=
# The lane runs through pytest-xdist with one worker more than the cores: with one per core, a worker that
# was not running a learning smoke spent about half its time waiting on real processes (sleeps, grace
# periods, torchrun agents), and the extra worker keeps the cores busy meanwhile (docs/ci.md). tests/lane.py
# orders it (the long real runs first, longest first, from tests/durations.json; exclusive tests last,
# alone). TEST_WORKERS=0 runs it in one process.
CORES := $(shell nproc 2>/dev/null || sysctl -n hw.ncpu 2>/dev/null || echo 1)
TEST_WORKERS ?= $(shell echo $$(( $(CORES) + 1 )))
XDIST := -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder
# The inner-loop lane: no real soak, training run, probe run or torchrun job (docs/ci.md).
FAST_MARKERS := not slow and not soak
# Headless Chromium renders the soak report, the probe history and the support matrix in the tests, which
# fail without it. The names are the ones tests/conftest.py looks for, in its order.
CHROMIUM_NAMES := chromium chromium-browser google-chrome
SOURCES := soakbench/__init__.py foundation runtime harness matrix scripts benchmarks

.PHONY: setup chromium bytecode demo test test-fast lint matrix-check

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --extra mjwarp --compile-bytecode

# Finds a Chromium that runs; installs one (apt-get, as root) where none is on PATH, else stops naming it.
chromium:
	@found=""; for name in $(CHROMIUM_NAMES); do \
	  if command -v $$name >/dev/null 2>&1; then found=$$name; break; fi; \
	done; \
	if [ -z "$$found" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "chromium: not on PATH; installing it with apt-get (the page-rendering tests need it)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
	    && found=chromium; \
	fi; \
	if [ -z "$$found" ]; then \
	  echo "error: chromium is missing: none of $(CHROMIUM_NAMES) is on PATH, and the page-rendering" \
	    "tests need one. Install it (Debian/Ubuntu: sudo apt-get install -y chromium, or" \
	    "chromium-browser; macOS: brew install --cask chromium), then run make test again." >&2; \
	  exit 1; \
	fi; \
	profile=$$(mktemp -d); \
	said=$$($$found --headless --no-sandbox --user-data-dir=$$profile --version 2>&1); ran=$$?; \
	rm -rf "$$profile"; \
	[ $$ran = 0 ] || { echo "error: chromium ($$(command -v $$found)) does not run: $$said" >&2; exit 1; }; \
	echo "chromium: $$(printf '%s\n' "$$said" | tail -n 1) ($$(command -v $$found))"

demo: setup
	$(RUN) soak demo

lint: setup
	$(RUN) ruff check $(SOURCES) tests
	$(RUN) ruff format --check $(SOURCES) tests
	$(RUN) mypy

# Every test spawns Python processes; the project's modules are compiled once here, so that none of them
# compiles its imports again (setup does the same for the locked packages with --compile-bytecode).
bytecode:
	@$(RUN) python -m compileall -q $(SOURCES) tests

test: setup chromium bytecode
	$(RUN) pytest $(XDIST) $(PYTEST_ARGS)

test-fast: setup chromium bytecode
	$(RUN) pytest $(XDIST) -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

matrix-check: setup
	$(RUN) matrix check
