# Two entry points for a fresh Linux host with only python3 and pip: `make demo` and `make test`.
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif
RUN := $(UV) run --frozen
PYTEST_ARGS ?=

.PHONY: setup demo test lint matrix-check

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet uv
	$(UV) sync --frozen --extra mjwarp

demo: setup
	$(RUN) soak demo

lint: setup
	$(RUN) ruff check foundation runtime harness matrix tests scripts benchmarks
	$(RUN) ruff format --check foundation runtime harness matrix tests scripts benchmarks
	$(RUN) mypy

test: setup
	$(RUN) pytest $(PYTEST_ARGS)

matrix-check: setup
	$(RUN) matrix check
