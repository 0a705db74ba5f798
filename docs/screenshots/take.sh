#!/usr/bin/env bash
# The screenshots listed in docs/ui.md: a fresh Dagster instance filled by populate.py (partitioned sample corpus,
# one nightly sweep, the bundled HotpotQA slice evaluated), `dagster dev` in its own process group, Debian's
# headless chromium (apt-get install chromium) driven by shoot.py, then the group is stopped. Run from the repository: docs/screenshots/take.sh
set -euo pipefail
repo=$(pwd)
tmp=$(mktemp -d)
port=${PORT:-3127}
mkdir -p "$tmp/home"
cp dagster.yaml "$tmp/home/"
export DAGSTER_HOME=$tmp/home RAG_PARTITIONS=collections RAG_WORKSPACE=$tmp/ws RAG_SOURCES=$repo/samples/corpus
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
.venv/bin/python docs/screenshots/populate.py > "$tmp/populate.log" 2>&1

# From DAGSTER_HOME, as `make ui` does (no "dagster.yaml will not be used" warning).
(cd "$tmp/home" && setsid "$repo/.venv/bin/dagster" dev -h 127.0.0.1 -p "$port" -w "$repo/workspace.yaml" \
    > "$tmp/dev.log" 2>&1 & echo $! > "$tmp/dev.pid")
# dagster dev started from a script ignores SIGTERM (STACK.md): the whole group gets SIGKILL.
trap 'kill -KILL -- -"$(cat "$tmp/dev.pid")" 2>/dev/null || true' EXIT
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/server_info" > /dev/null && break; sleep 2; done
sleep 20   # the code location loads after the server answers

# Through the DevTools protocol: the community dialog is dismissed the way the UI does it (setNuxSeen), and a
# metadata dialog is opened by a click, as a person would.
curl -s -X POST -H 'Content-Type: application/json' "http://127.0.0.1:$port/graphql" -d '{"query":"mutation { setNuxSeen }"}'
md="[...document.querySelectorAll('a,button,span,div')].filter(e => e.childElementCount === 0 && e.textContent.trim() === '[Show Markdown]')"
.venv/bin/python docs/screenshots/shoot.py "$port" docs/screenshots \
    "asset-graph=/assets/subchunk_index?view=lineage&lineageDepth=2|900" \
    "partitioned-asset=/assets/long_units|1500" \
    "workspace-totals=/assets/workspace_totals|1500||1600" \
    "report=/assets/retrieval_evaluation|1300||1600" \
    "report-open=/assets/retrieval_evaluation|1100|$md[0].click()|1600" \
    "plot-by-type=/assets/retrieval_evaluation|1000|$md[3].click()|1400" \
    "automation=/automation|800"
echo "'will not be used' warnings: $(grep -c 'will not be used' "$tmp/dev.log" || true)"
