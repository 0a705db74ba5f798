#!/usr/bin/env bash
# The screenshots listed in docs/ui.md, at 1,440 px: a fresh Dagster instance filled by populate.py (partitioned
# sample corpus, one nightly sweep, the bundled HotpotQA slice evaluated), `dagster dev` in its own process group,
# Debian's headless chromium (apt-get install chromium) driven by shoot.py, then the group is stopped.
# Run from the repository: docs/screenshots/take.sh (VENV names another virtual environment than .venv).
set -euo pipefail
repo=$(pwd)
venv=${VENV:-$repo/.venv}
tmp=$(mktemp -d)
port=${PORT:-3127}
mkdir -p "$tmp/home"
cp dagster.yaml "$tmp/home/"
export DAGSTER_HOME=$tmp/home RAG_PARTITIONS=collections RAG_WORKSPACE=$tmp/ws RAG_SOURCES=$repo/samples/corpus
export PYTHONPATH=$repo${PYTHONPATH:+:$PYTHONPATH}
"$venv/bin/python" docs/screenshots/populate.py > "$tmp/populate.log" 2>&1

# From DAGSTER_HOME, as `make ui` does (no "dagster.yaml will not be used" warning).
# exec: the recorded pid is dagster dev's own, the leader of the group setsid gives it.
(cd "$tmp/home" && exec setsid "$venv/bin/dagster" dev -h 127.0.0.1 -p "$port" -w "$repo/workspace.yaml" \
    > "$tmp/dev.log" 2>&1) & echo $! > "$tmp/dev.pid"
# dagster dev started from a script ignores SIGTERM: the whole group gets SIGKILL.
trap 'kill -KILL -- -"$(cat "$tmp/dev.pid")" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/server_info" > /dev/null && break; sleep 2; done

# A metadata dialog is opened by a click, as a person would (dagster.yaml turns the community dialog off).
md="[...document.querySelectorAll('a,button,span,div')].filter(e => e.childElementCount === 0 && e.textContent.trim() === '[Show Markdown]')"
"$venv/bin/python" docs/screenshots/shoot.py "$port" docs/screenshots \
    "asset-graph=/assets/subchunk_index?view=lineage&lineageDepth=2|900" \
    "partitioned-asset=/assets/long_units|1500" \
    "subchunk-index=/assets/subchunk_index|1500" \
    "workspace-totals=/assets/workspace_totals|1700" \
    "report=/assets/retrieval_evaluation|1300" \
    "report-open=/assets/retrieval_evaluation|1100|$md[0].click()" \
    "plot-by-type=/assets/retrieval_evaluation|1000|$md[3].click()" \
    "plot-latency=/assets/retrieval_evaluation|1000|$md[4].click()"
# The daemon's first tick of collection_changes requests the collections' runs; the next ones request none, and
# the pointer on such a tick's "0 runs requested" shows why.
sleep 75
skipped="(() => { const tag = [...document.querySelectorAll('td *')].find(e => e.childElementCount === 0 && e.textContent.trim() === '0 runs requested'); const r = tag.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"
"$venv/bin/python" docs/screenshots/shoot.py "$port" docs/screenshots \
    "automation=/automation|800" \
    "sensor-skip=/locations/pipelines.definitions/sensors/collection_changes|1000|$skipped"
echo "'will not be used' warnings: $(grep -c 'will not be used' "$tmp/dev.log" || true)"
