# The two commands a newcomer runs: `make demo` and `make test`. Both install first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: install demo test test-fast ui bench clean

$(BIN)/rag: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e ".[dev]"
	touch $(BIN)/rag

install: $(BIN)/rag

demo: install            ## ingest the bundled sample corpus offline, then say where to look
	$(BIN)/rag demo

test: install            ## the whole suite, slow tests included (what CI runs)
	$(BIN)/python -m pytest -q

test-fast: install       ## skip the tests marked slow
	$(BIN)/python -m pytest -q -m "not slow"

ui: install              ## Dagster UI on http://127.0.0.1:3000 (asset graph, metadata, checks, schedules)
	mkdir -p .rag/dagster_home && cp -n dagster.yaml .rag/dagster_home/ || true
	DAGSTER_HOME=$(CURDIR)/.rag/dagster_home $(BIN)/dagster dev -h 127.0.0.1 -p 3000

bench: install           ## ingest benchmark on MuSiQue; figures in bench/results/
	$(BIN)/python bench/ingest.py

clean:
	rm -rf .rag
