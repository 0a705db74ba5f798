"""The asset pages in a real browser: Debian's headless chromium opens the Dagster UI at 1,440 px on a workspace
ingested in the partitioned layout (the sample corpus, and the broken inputs of samples/bad as a collection of
their own) and evaluated on its question set, and no metadata table is wider than its box, inline or in the dialog
a long Markdown value opens in."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
from conftest import REPO, SAMPLES

from pipelines.definitions import build_definitions
from pipelines.workspace_resources import workspace_resources
from rag.store.settings import IngestSettings

sys.path.insert(0, str(REPO / "docs" / "screenshots"))
from shoot import Browser  # noqa: E402  (docs/screenshots/shoot.py: the browser take.sh uses too)

BIN = Path(sys.executable).parent   # the environment's dagster-webserver
PAGES = ("source_documents", "long_units", "subchunk_index", "workspace_totals", "workspace_evaluation")
EVALUATION = {"methods": ["longrag", "elite"], "budgets": [1000, 2000]}
# For every table inside the metadata table's value column: the width the metadata table would need if that table
# were the widest thing in its column, and the width of the box that holds the metadata table.
INLINE = """(() => {
  const outer = [...document.querySelectorAll('table')].find(t => !t.parentElement.closest('table'));
  let box = outer.parentElement;
  while (box && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
  return [...outer.querySelectorAll(':scope > tbody > tr')].flatMap(row => {
    const cells = row.querySelectorAll(':scope > td'), value = cells[cells.length - 1], table = value.querySelector('table');
    if (!table) return [];
    const pad = parseFloat(getComputedStyle(value).paddingLeft) + parseFloat(getComputedStyle(value).paddingRight);
    const others = outer.getBoundingClientRect().width - value.getBoundingClientRect().width;
    return [[cells[0].textContent.trim(), Math.round(others + pad + table.getBoundingClientRect().width), box.clientWidth]];
  });
})()"""
MARKDOWN_LINKS = ("[...document.querySelectorAll('a,button,span,div')]"
                  ".filter(e => e.childElementCount === 0 && e.textContent.trim() === '[Show Markdown]')")
DIALOG = """(() => {
  const dialog = document.querySelector('[role=dialog]');
  return [...dialog.querySelectorAll('table')].map(t => {
    let box = t.parentElement;
    while (box !== dialog && getComputedStyle(box).overflowX === 'visible') box = box.parentElement;
    return [Math.round(t.getBoundingClientRect().width), box.clientWidth];
  });
})()"""
CLOSE = "[...document.querySelectorAll('[role=dialog] button')].find(b => b.textContent.trim() === 'Close').click()"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def populate(environ: dict[str, str], reports: Path) -> None:
    """Every collection ingested (samples/bad last, so the asset pages show its quarantine), the totals, and the
    workspace evaluated on the sample questions beside its sources."""
    settings = IngestSettings.from_env(environ, environ["RAG_WORKSPACE"], [])
    defs = build_definitions(workspace_resources(settings))
    instance = dg.DagsterInstance.from_config(environ["DAGSTER_HOME"])
    try:
        tick = defs.get_sensor_def("collection_changes")(dg.build_sensor_context(instance=instance))
        for request in tick.dynamic_partitions_requests:
            instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        for key in sorted((r.partition_key for r in tick.run_requests), key=lambda k: (k == "bad", k)):
            assert defs.resolve_job_def("ingest").execute_in_process(instance=instance, partition_key=key).success
        totals = defs.resolve_implicit_global_asset_job_def().get_subset(
            asset_selection={dg.AssetKey("workspace_totals")})
        assert totals.execute_in_process(instance=instance).success
        config = {"ops": {"workspace_evaluation": {"config": EVALUATION | {"out_root": str(reports)}}}}
        assert defs.resolve_job_def("evaluate_workspace").execute_in_process(instance=instance,
                                                                            run_config=config).success
    finally:
        instance.dispose()


@pytest.fixture
def ui(tmp_path, corpus):
    """`dagster-webserver` on a free port over a populated instance, as `make ui` starts it (from DAGSTER_HOME)."""
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (apt-get install chromium; .ci/run installs it)")
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    bad = shutil.copytree(SAMPLES / "bad", tmp_path / "bad")
    for name in ("questions.jsonl", "users.yaml"):   # the question set beside the sources, and its askers
        shutil.copy(SAMPLES / name, tmp_path / name)
    environ = {"DAGSTER_HOME": str(home), "RAG_PARTITIONS": "collections", "RAG_WORKSPACE": str(tmp_path / "ws"),
               "RAG_SOURCES": os.pathsep.join([str(corpus), str(bad)]), "RAG_DEFAULT_ACL": "support"}
    populate(environ, tmp_path / "reports")
    port = free_port()
    env = os.environ | environ | {"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    server = subprocess.Popen([str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port), "-w",
                               str(REPO / "workspace.yaml")], cwd=home, env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(server.pid, signal.SIGKILL)   # the webserver's code server is in its group
        server.wait(timeout=30)


@pytest.mark.slow
def test_no_metadata_table_of_an_asset_page_is_wider_than_its_box_at_1440_px(ui):
    too_wide, measured = [], []
    with Browser() as page:
        for asset in PAGES:
            page.goto(f"{ui}/assets/{asset}", width=1440, height=1000)
            page.wait_for("[...document.querySelectorAll('td')].some(td => td.textContent.trim() === 'Value') || "
                          "document.querySelectorAll('table tr').length > 5")
            for key, need, box in page.evaluate(INLINE):
                measured.append((asset, key))
                if need > box:
                    too_wide.append(f"{asset} → {key}: {need} px in a {box} px box")
            for i in range(page.evaluate(f"{MARKDOWN_LINKS}.length")):
                key = page.evaluate(f"{MARKDOWN_LINKS}[{i}].closest('tr').querySelector('td').textContent.trim()")
                page.evaluate(f"{MARKDOWN_LINKS}[{i}].click()")
                page.wait_for("document.querySelector('[role=dialog] table, [role=dialog] p') !== null")
                for width, box in page.evaluate(DIALOG):
                    measured.append((asset, key))
                    if width > box:
                        too_wide.append(f"{asset} → {key} (dialog): {width} px in a {box} px box")
                page.evaluate(CLOSE)
                page.wait_for("document.querySelector('[role=dialog]') === null", settle_s=0.5)
    # The tables a team reads first were there to measure: totals per partition, sizes, the quarantine.
    keys = {key for _, key in measured}
    assert {"by_partition", "links_by_partition", "storage_by_part", "quarantine", "report", "report_full"} <= keys, keys
    assert not too_wide, too_wide
