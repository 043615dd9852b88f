# gpufleet: `make demo` runs the main job on a simulated fleet, `make test` runs every check.
SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PATH := $(abspath $(BIN)):$(PATH)
export ANSIBLE_ROLES_PATH := $(abspath roles)
export ANSIBLE_COLLECTIONS_PATH := $(abspath .gpufleet/collections)
# Python keeps the bytecode it compiles, as it does by default: with PYTHONDONTWRITEBYTECODE set (some
# shells and CI images set it) every ansible-playbook and every forked worker compiles the collection's
# plugins again, and every simulated BMC, leaf and tool the test fleets start compiles the simulator.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo screenshot docs test lint sanity unit integration conformance molecule bench clean sim-down

setup: $(STAMP) .gpufleet/collections/ansible_collections/gpufleet/node

# Finds a Python >= 3.12 for ansible-core 2.21 (PYTHON=... overrides).
$(STAMP): pyproject.toml sim/pyproject.toml requirements/constraints.txt
	@bash scripts/system-packages.sh
	@py="$$(bash scripts/find-python.sh)" || exit 2; \
	  test -x $(BIN)/python || "$$py" -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c requirements/constraints.txt -e '.[dev]' -e ./sim
	@touch $@

.gpufleet/collections/ansible_collections/gpufleet/node:
	@mkdir -p $(@D)
	@ln -sfn $(abspath .) $@

demo: setup
	$(BIN)/gpufleet-sim demo

# README's picture: the demo's gate page in the tests' headless Chromium (scripts/screenshot.py).
screenshot: demo
	$(BIN)/python scripts/screenshot.py reports/demo/gate/report.html docs/img/gate-report.png

# lint's checks and sanity share nothing (sanity works on a copy in a temporary directory): they run at
# once, each one timed and its output printed whole when it ends. They run beside the unit tests: each
# alone kept ~1.4 of 2 cores busy (2026-12-07, a fresh clone: setup, lint and unit 1.24-1.62). Their
# lines are printed as they are written (make's line sync: pytest's progress lines, each check's block);
# every one runs, and make test stops before integration when any failed. Then integration, conformance.
test: setup
	@$(MAKE) --no-print-directory --keep-going -j 2 --output-sync=line static-timed unit
	@$(MAKE) --no-print-directory integration conformance

.PHONY: static-timed
static-timed: setup
	@$(TIMED) "lint and sanity" $(MAKE) --no-print-directory --keep-going -j $(TEST_STATIC_JOBS) \
	  --output-sync=target sanity-timed $(LINT_CHECKS)

# The role READMEs and the Galaxy README, generated from the argument specs and plugin docs
# (scripts/make_docs.py); lint fails when a committed page is out of date.
docs: setup
	$(BIN)/python scripts/make_docs.py

# lint's checks share nothing: they run at once (LINT_JOBS), each one's output printed whole when it
# ends, with its time (scripts/timed.sh); every check runs, and lint fails when any of them does.
# ansible-doc renders every plugin of a type in one process, which exits non-zero naming the first one
# that does not render.
LINT_JOBS ?= 4
TEST_STATIC_JOBS ?= 5
LINT_CHECKS := lint-ansible-lint lint-ansible-doc lint-mypy lint-docs lint-changelog lint-ruff
TIMED := bash scripts/timed.sh
.PHONY: $(LINT_CHECKS) sanity-timed
lint: setup
	@$(MAKE) --no-print-directory --keep-going -j $(LINT_JOBS) --output-sync=target $(LINT_CHECKS)

lint-ruff: setup
	@$(TIMED) ruff bash -c '$(BIN)/ruff check src sim plugins tests bench scripts && \
	  $(BIN)/ruff format --check src sim plugins tests bench scripts'

lint-mypy: setup
	@$(TIMED) mypy $(BIN)/mypy

lint-ansible-lint: setup
	@$(TIMED) ansible-lint $(BIN)/ansible-lint --offline --profile production

lint-docs: setup
	@$(TIMED) make_docs $(BIN)/python scripts/make_docs.py --check

lint-changelog: setup
	@$(TIMED) antsibull-changelog $(BIN)/antsibull-changelog lint

lint-ansible-doc: setup
	@$(TIMED) ansible-doc bash -c 'doc() { $(BIN)/ansible-doc -t $$1 \
	    $$(for f in $$2/*.py; do echo gpufleet.node.$$(basename $$f .py); done) > /dev/null; }; \
	  doc module plugins/modules && doc callback plugins/callback && doc filter plugins/filter && \
	  echo "ansible-doc: every module, callback and filter renders"'

# ansible-core's ansible-test sanity on what the collection ships (scripts/sanity.sh says how and why;
# it passes with no ignore file: keep it so). ~1.5 min; the first run builds its
# virtual environments from PyPI (~/.ansible/test/venv), a few minutes more.
sanity: setup
	PY=$(BIN)/python bash scripts/sanity.sh $(SANITY_ARGS)

sanity-timed: setup
	@$(TIMED) sanity env PY=$(BIN)/python bash scripts/sanity.sh $(SANITY_ARGS)

# Many unit tests wait (a real burn-in of 2 s, a subprocess under timeout, a server's deadline): on 2
# cores, 2 workers kept ~1.3 cores busy (~300 CPU-s in ~225 s); a third fills the waits.
UNIT_WORKERS ?= 3
unit: setup
	$(BIN)/pytest -n $(UNIT_WORKERS) tests/unit

# Workers share the tests file by file, molecule's scenarios one by one, the heaviest first
# (tests/integration/scheduling.py). Much of a test's time is spent waiting for its fleet (burn-ins,
# windows, ssh): 2 workers kept 1.1 of 2 cores busy over node_health, sim_vllm, link_flap_settle and 3
# molecule scenarios, so a third runs beside them (the 3 heaviest files at once: 1.83 cores, 2026-12-06).
INTEGRATION_WORKERS ?= 3
integration: setup
	$(BIN)/pytest -n $(INTEGRATION_WORKERS) --dist loadfile --durations=25 tests/integration

# The real implementations gpufleet meets in production, started by the tests from Debian's and PyPI's
# packages on loopback addresses and in network namespaces they create (tests/conformance/README.md).
conformance: setup
	$(BIN)/pytest -n 2 --durations=10 tests/conformance

# Not part of `make test`: fleet-scale timing on 32 simulated nodes (every method) and 128 (ping and
# drift: controller CPU per node), ~35 min on 2 cores, then report.html at 1,000 synthetic nodes in
# headless Chromium (~1-2 min).
bench: setup
	$(BIN)/pip install -q -c requirements/constraints.txt -e '.[bench]'
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/report_html.py

molecule: setup
	cd . && $(BIN)/molecule test -s default

sim-down:
	-$(BIN)/gpufleet-sim down

clean: sim-down
	rm -rf $(VENV) .gpufleet .pytest_cache .mypy_cache .ruff_cache
