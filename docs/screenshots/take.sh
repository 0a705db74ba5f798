#!/usr/bin/env bash
# The screenshots listed in docs/ui.md: a fresh Dagster instance filled by populate.py (partitioned sample corpus,
# one nightly sweep, the bundled HotpotQA slice evaluated), `dagster dev` in its own process group, Debian's
# headless chromium (apt-get install chromium), then the group is stopped. Run from the repository: docs/screenshots/take.sh
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
trap 'kill -- -"$(cat "$tmp/dev.pid")" 2>/dev/null || true' EXIT
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/server_info" > /dev/null && break; sleep 2; done
sleep 20   # the code location loads after the server answers

shot() {  # name path [height]
    chromium --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
        --disable-sync --no-first-run --user-data-dir="$(mktemp -d)" --hide-scrollbars \
        --window-size=1400,"${3:-1000}" --virtual-time-budget=30000 \
        --screenshot="$repo/docs/screenshots/$1.png" "http://127.0.0.1:$port$2" 2> /dev/null
}
shot asset-graph "/asset-groups"
shot partitioned-asset "/assets/long_units" 1400
shot workspace-totals "/assets/workspace_totals" 1400
shot report "/assets/retrieval_evaluation" 1400
shot automation "/automation"
grep -c "will not be used" "$tmp/dev.log" || true
