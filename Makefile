# Commands for a newcomer: `make demo` (the quick worked example; `make demo-full` the whole one), `make test` (the fast tier) and `make test-all` (everything CI runs).
# Each creates .venv on first use.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip
# The extras the tests and benchmarks exercise: every one (`all`), installed with the `dev` or `bench` group.
EXTRAS := all

.PHONY: demo demo-full test test-all browsers pg-start pg-stop slurm-start slurm-stop bench soak clean reliability-table docs cli-reference wheel quickstart lint gpu-wheels gpu-check mutation mutation-sample

# pip >= 25.1 reads pyproject.toml's dependency groups (`--group dev`: the contributors' tools, not extras).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	@.ci/pip-install $(BIN)/python "pip 25.1 or newer (it reads the dependency groups)" 'pip>=25.1'

# torch==2.13.0 first: on these machines it is a CPU build already on disk, and the project's own range
# (torch>=2.3,<3) is then satisfied without pulling a multi-GB CUDA build.
$(VENV)/.torch: | $(BIN)/python
	@.ci/pip-install $(BIN)/python "torch 2.13.0, the CPU build" torch==2.13.0
	touch $@

$(VENV)/.demo: pyproject.toml $(VENV)/.torch
	@.ci/pip-install $(BIN)/python "yieldgate with the demo's extra, [torch], into $(VENV)" -e '.[torch]'
	touch $@

$(VENV)/.dev: pyproject.toml $(VENV)/.torch
	@.ci/pip-install $(BIN)/python "yieldgate with every extra and the development tools into $(VENV)" \
		-e '.[$(EXTRAS)]' --group dev
	touch $@

$(VENV)/.bench: pyproject.toml $(VENV)/.torch
	@.ci/pip-install $(BIN)/python "yieldgate with every extra and the benchmarks' tools into $(VENV)" \
		-e '.[$(EXTRAS)]' --group bench
	touch $@

# The quick worked example (about a minute on 2 cores); demo-full: the whole one (about two minutes more).
demo: $(VENV)/.demo
	$(BIN)/yieldgate demo --quick

demo-full: $(VENV)/.demo
	$(BIN)/yieldgate demo

# The fast tier: unit and small integration tests, no real training runs or subprocess fleets (<= 90 s on 2 cores;
# its closing line gives pytest's time), one worker per core (pytest-xdist; an idle worker takes queued tests from a
# busy one). Tests marked `slow` are left to `make test-all`; tests/integration/ holds only slow modules and is not
# even collected here (importing it costs every worker ~3 s).
# Bytecode is written even where the shell sets PYTHONDONTWRITEBYTECODE: without the cache every worker and every
# `yieldgate` subprocess compiles the package and the tests again (collection alone goes from 6 s to 14 s).
# The closing line times pytest alone: the clock starts once .venv is installed, not before the one-time install.
test: $(VENV)/.dev
	@start=$$(date +%s); status=0; \
		PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --dist worksteal -m "not slow and not soak" \
		--ignore=tests/integration --durations=10 || status=$$?; \
		echo "make test: $$(( $$(date +%s) - start )) s of pytest (the one-time install into $(VENV) not counted)"; \
		exit $$status

# ruff (lint and format) and mypy over src/, tests/ and benchmarks/ (settings in pyproject.toml; mypy's `files`
# names the three): py.typed is shipped, so the types must be true. CI runs it through test-all.
lint: $(VENV)/.dev
	$(BIN)/python -m ruff check src tests benchmarks
	$(BIN)/python -m ruff format --check src tests benchmarks
	$(BIN)/python -m mypy

# The browser the report and dashboard tests drive (Debian's chromium, through Playwright's executable_path: its own
# browser download is not reachable here). Installed when missing and we are root with apt-get; otherwise it says
# so, and those tests skip with the same reason.
browsers:
	@if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		export DEBIAN_FRONTEND=noninteractive; \
		apt-get install -y --no-install-recommends chromium >/dev/null \
		|| { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; }; \
	else echo "chromium is missing and cannot be installed here (needs root and apt-get): the browser tests will skip"; fi

# A throwaway PostgreSQL server for the tests (.ci/pg: Debian's postgresql, installed when missing and we are root
# with apt-get; initdb into a temporary folder as a non-root user, 127.0.0.1 only, a free port). pg-start prints the
# `export YIELDGATE_TEST_PG_URL=...` line the PostgreSQL tests read (without it they skip); pg-stop removes it all.
pg-start:
	@.ci/pg start

pg-stop:
	@.ci/pg stop

# A throwaway one-node Slurm cluster (.ci/slurm: Debian's slurm-wlm with munge, installed when missing and we are
# root with apt-get; slurmctld and slurmd on 127.0.0.1, config in a temporary folder). The campaign test of the
# `slurm` executor reads YIELDGATE_TEST_SLURM_CONF (without it, it skips); slurm-stop removes it all.
slurm-start:
	@.ci/slurm start

slurm-stop:
	@.ci/slurm stop

# Everything but the soak variants: real trainings, probes, processes, distributed runs, the browser, both ledger
# backends. CI runs this. The PostgreSQL server is stopped whether the tests pass or fail.
test-all: $(VENV)/.dev lint browsers pg-start slurm-start
	@status=0; PYTHONDONTWRITEBYTECODE= YIELDGATE_TEST_PG_URL="$$(cat .pg/url 2>/dev/null)" \
		YIELDGATE_TEST_SLURM_CONF="$$(cat .slurm/conf 2>/dev/null)" $(BIN)/python -m pytest -q -m "not soak" \
		--durations=20 || status=$$?; .ci/pg stop; .ci/slurm stop; exit $$status

bench: $(VENV)/.bench
	$(BIN)/python benchmarks/bench_ledger.py
	$(BIN)/python benchmarks/bench_tracker.py
	$(BIN)/python benchmarks/bench_compare.py
	$(BIN)/python benchmarks/bench_forecast.py
	$(BIN)/python benchmarks/bench_refit.py
	$(BIN)/python benchmarks/bench_import.py
	$(BIN)/python benchmarks/bench_diagnose.py
	$(BIN)/python benchmarks/bench_dedup.py
	$(BIN)/python benchmarks/bench_gate.py
	$(BIN)/python benchmarks/bench_durability.py
	$(BIN)/python benchmarks/bench_serve.py
	$(BIN)/python benchmarks/bench_decide.py
	$(BIN)/python benchmarks/bench_published.py
	@.ci/pg start >/dev/null; status=0; YIELDGATE_TEST_PG_URL="$$(cat .pg/url 2>/dev/null)" \
		$(BIN)/python benchmarks/bench_pg.py || status=$$?; .ci/pg stop; exit $$status

# The GPU check (benchmarks/gpu_check.py, issue #49) runs on a machine with a GPU, its own python3 and torch, and maybe no
# network. `make gpu-wheels`, where there is one, fetches what that machine's Python (GPU_PYTHON_VERSION, x86-64 Linux)
# lacks into build/gpu-wheels/ (GPU_WHEELS: the lent machines hold every other dependency); `make gpu-check` there
# installs them into build/gpu-site/ and runs the check (GPU_CHECK_ARGS: --quick, --out FILE, --only 3,5).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
GPU_PYTHON_VERSION ?= 3.12
GPU_WHEELS ?= 'pydantic>=2.6'
GPU_CHECK_ARGS ?=

gpu-wheels: | $(BIN)/python
	rm -rf build/gpu-wheels && mkdir -p build/gpu-wheels
	$(PIP) download --quiet --only-binary=:all: --python-version $(GPU_PYTHON_VERSION) --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
		--dest build/gpu-wheels $(GPU_WHEELS)

gpu-check:
	@if ls build/gpu-wheels/*.whl >/dev/null 2>&1; then \
		$(GPU_PYTHON) -m pip install --quiet --no-index --no-deps --no-compile --upgrade --target build/gpu-site \
		build/gpu-wheels/*.whl || echo "gpu-check: build/gpu-wheels/ does not install on $(GPU_PYTHON)" \
		"(made for Python $(GPU_PYTHON_VERSION): make gpu-wheels GPU_PYTHON_VERSION=...); going on without it"; fi
	$(GPU_PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

# Rewrites the Reliability table (docs/reliability.md) from what the reliability tests measure.
reliability-table: $(VENV)/.dev pg-start
	@status=0; YIELDGATE_TEST_PG_URL="$$(cat .pg/url 2>/dev/null)" YIELDGATE_WRITE_RELIABILITY=1 $(BIN)/python -m pytest -q \
		tests/integration/test_reliability.py tests/test_ledger_check.py tests/test_tracker.py tests/test_bad_input.py \
		tests/integration/test_concurrency.py tests/test_security.py tests/test_ingest.py tests/integration/test_distributed.py \
		tests/integration/test_kill_matrix.py tests/integration/test_campaign_kills.py tests/integration/test_reliability_pg.py tests/test_ledger_pg.py \
		tests/test_liveness.py tests/test_attribution.py tests/test_serve_limits.py tests/test_ledger_merge.py \
		tests/test_spills.py tests/test_checksum_fields.py tests/test_own_trainer_input.py tests/test_campaign_failures.py tests/integration/test_orphans.py \
		tests/integration/test_ray_nodes.py || status=$$?; .ci/pg stop; \
		exit $$status

soak: $(VENV)/.dev pg-start
	@status=0; PYTHONDONTWRITEBYTECODE= YIELDGATE_TEST_PG_URL="$$(cat .pg/url 2>/dev/null)" $(BIN)/python -m pytest -q -m soak \
		--durations=20 || status=$$?; .ci/pg stop; exit $$status

# The docs site (docs/, mkdocs.yml) into site/; --strict turns a broken link or a missing page into a failure.
docs: $(VENV)/.dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

# docs/cli-reference.md from the typer app itself; tests/test_docs.py fails when it is out of date.
cli-reference: $(VENV)/.dev
	$(BIN)/python -m typer yieldgate.cli utils docs --name yieldgate --title "CLI reference" --output docs/cli-reference.md

# The wheel alone: pypa/build in its own small environment (not the dev extras, which take many minutes).
$(VENV)/.build: | $(BIN)/python
	$(PIP) install --quiet 'build>=1.2'
	touch $@

wheel: $(VENV)/.build
	rm -rf dist
	$(BIN)/python -m build --wheel --outdir dist .

# The docs' Quickstart as written, against dist/'s wheel installed with [torch] into a fresh virtual environment
# (make test-all runs the same test on a wheel it builds itself).
quickstart: wheel $(VENV)/.dev
	YIELDGATE_WHEEL="$$(ls dist/yieldgate-*.whl)" $(BIN)/python -m pytest -q -m slow tests/integration/test_quickstart.py

clean:
	rm -rf $(VENV) build dist site src/*.egg-info .pytest_cache .hypothesis

# Mutation testing of the code that decides (issue #44 item 11): mutmut over gate/ and the diagnosis detectors
# ([tool.mutmut] in pyproject.toml), each mutant run against the fast tier's tests that reach it. Hours on 2 cores;
# `mutmut results` lists the survivors; docs/gate.md ("How well the tests pin the gate") gives the last score.
mutation: $(VENV)/.dev
	$(PIP) install --quiet --group mutation
	$(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

# The same mutants, a uniform sample of 400 of them tested (about an hour on 2 cores, not the whole run's 16):
# the share killed with its 95% interval, and the survivors (benchmarks/mutation_sample.py).
mutation-sample: $(VENV)/.dev
	$(PIP) install --quiet --group mutation
	$(BIN)/python benchmarks/mutation_sample.py --n 400 --seed 0
