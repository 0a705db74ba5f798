"""`rag eval` and the Dagster asset on a four-question slice of HotpotQA: every file, every figure, recomputable."""
import argparse
import json
import shutil
import struct
from datetime import datetime
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from assets.evaluation import evaluation_definitions
from pipelines.eval_cli import add_eval_parser
from rag.evaluation import BudgetExceeded, EvalConfig, Evaluator, evaluate, prepare_workspace
from rag.evaluation import load_questions as eval_questions
from rag.retrieval.context import ContextItem, RetrievalResult
from rag.sources.benchmarks import benchmark_dir, evidence_recall, load_questions
from resources import EmbedderResource
from resources.llm import LLMResource

METHODS, BUDGETS, QUESTIONS = ("longrag", "elite", "shortchunk"), (500, 1000), 4


def slice_of_hotpotqa(dest: Path, n: int) -> Path:
    """The first n questions and the documents of their contexts (gold and distractors), in the benchmark format."""
    dest.mkdir(parents=True)
    hotpotqa = benchmark_dir("hotpotqa")
    questions = [json.loads(line) for line in (hotpotqa / "questions.jsonl").open()][:n]
    wanted = {d for q in questions for d in q["context_doc_ids"]}
    docs = [line for line in (hotpotqa / "docs.jsonl").open() if json.loads(line)["doc_id"] in wanted]
    (dest / "docs.jsonl").write_text("".join(docs))
    (dest / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    return dest


def rag_eval(*argv: str) -> int:
    """`rag eval ARGS` through the parser and handler that pipelines.cli registers."""
    parser = argparse.ArgumentParser(prog="rag")
    add_eval_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", *argv])
    return args.func(args)


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("eval")
    bench = slice_of_hotpotqa(root / "benchmarks" / "tiny", QUESTIONS)
    paths = {"bench": bench, "workspace": root / "workspaces" / "tiny", "out": root / "out", "root": root,
             "documents": sum(1 for _ in (bench / "docs.jsonl").open())}
    code = rag_eval("--benchmark", str(bench), "--workspace", str(paths["workspace"]), "--methods", ",".join(METHODS),
                    "--budgets", ",".join(map(str, BUDGETS)), "--out", str(paths["out"]))
    return paths | {"code": code}


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").open()]


def test_rag_eval_writes_every_report_file(run):
    assert run["code"] == 0
    for name in ("results.jsonl", "results.duckdb", "summary.json", "report.md", "quality.png", "latency.png",
                 "storage.png"):
        assert (run["out"] / name).stat().st_size > 0, name
    for png in run["out"].glob("*.png"):
        width, height = struct.unpack(">II", png.read_bytes()[16:24])
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and width > 200 and height > 200


def test_every_question_method_and_budget_has_a_row_within_its_budget(run):
    results = rows(run["out"])
    assert len(results) == QUESTIONS * len(METHODS) * len(BUDGETS)
    assert {(r["method"], r["budget"]) for r in results} == {(m, b) for m in METHODS for b in BUDGETS}
    assert all(0 < r["tokens"] <= r["budget"] for r in results)
    assert all(r["retrieved_doc_ids"] and r["qid"] for r in results)


def test_the_figures_can_be_recomputed_from_the_rows(run):
    gold = {q.qid: q.gold_doc_ids for q in load_questions(run["bench"])}
    results = rows(run["out"])
    summary = json.loads((run["out"] / "summary.json").read_text())
    for cell in summary["results"]:
        mine = [r for r in results if (r["method"], r["budget"]) == (cell["method"], cell["budget"])]
        recall = sum(evidence_recall(set(r["retrieved_doc_ids"]), gold[r["qid"]]) for r in mine) / len(mine)
        assert cell["evidence_recall"]["mean"] == pytest.approx(recall, abs=1e-4)
        assert cell["tokens_max"] == max(r["tokens"] for r in mine) <= cell["budget"]


def test_the_duckdb_tables_hold_the_rows_and_the_intervals(run):
    con = duckdb.connect(str(run["out"] / "results.duckdb"), read_only=True)
    (n,), = con.execute("SELECT count(*) FROM results WHERE tokens <= budget").fetchall()
    (cells,), = con.execute("SELECT count(DISTINCT (method, budget)) FROM figures "
                            "WHERE metric = 'evidence_recall' AND low <= mean AND mean <= high").fetchall()
    con.close()
    assert n == QUESTIONS * len(METHODS) * len(BUDGETS)
    assert cells == len(METHODS) * len(BUDGETS)


def test_the_summary_says_what_ran_and_what_each_method_costs(run):
    summary = json.loads((run["out"] / "summary.json").read_text())
    assert summary["reader"] == "none" and summary["answered"] == 0 and summary["elite_policy"] == "offline"
    assert summary["command"].startswith("rag eval --benchmark ") and "--budgets 500,1000" in summary["command"]
    assert summary["corpus"]["documents"] == run["documents"] and all(summary["workspace_checks"].values())
    methods = summary["methods"]
    assert methods["longrag"]["prepare_seconds"] > methods["elite"]["prepare_seconds"]
    assert methods["longrag"]["storage_bytes"] > methods["elite"]["storage_bytes"]
    for cell in summary["results"]:
        assert cell["f1"] is None and cell["exact_match"] is None  # retrieval only: no answer metric at all
        assert cell["avg_query_seconds"] > cell["retrieve_s"]["mean"]
    assert {(d["a"], d["b"]) for d in summary["differences"]} == \
        {("longrag", "elite"), ("longrag", "shortchunk"), ("elite", "shortchunk")}


def test_the_report_names_the_reader_the_corpus_and_the_command(run):
    report = (run["out"] / "report.md").read_text()
    summary = json.loads((run["out"] / "summary.json").read_text())
    assert summary["command"] in report
    assert "**Reader**: none" in report and f"{run['documents']} documents" in report
    assert "![quality](quality.png)" in report


def test_a_method_over_its_budget_stops_the_evaluation(run, monkeypatch, embedder):
    import rag.retrieval.longrag
    from rag.models.tokens import default_counter

    def greedy(snap, ranked, budget):
        text = "word " * (budget + 1)
        return RetrievalResult("longrag", budget, [ContextItem("d", "1", "t", text, 1, ((0, 1),), 1.0)])

    monkeypatch.setattr(rag.retrieval.longrag, "pack_ranked", greedy)
    prepared = prepare_workspace(run["bench"], run["workspace"], embedder, default_counter())
    try:
        with pytest.raises(BudgetExceeded):
            evaluate(prepared, eval_questions(run["bench"], 1),
                     Evaluator(EvalConfig(methods=("longrag",), budgets=(500,)), embedder, default_counter()))
    finally:
        prepared.close()


def test_a_folder_that_is_not_a_benchmark_is_a_one_line_error(tmp_path):
    from pipelines.cli import CliError

    (tmp_path / "docs.jsonl").write_text("")
    with pytest.raises(CliError, match="no questions.jsonl"):
        rag_eval("--benchmark", str(tmp_path), "--workspace", str(tmp_path / "ws"), "--out", str(tmp_path / "out"))


def test_a_benchmark_workspace_refuses_another_folders_documents_and_keeps_its_own(run, tmp_path):
    from pipelines.cli import CliError

    other = tmp_path / "tiny"
    shutil.copytree(run["bench"], other)  # the same documents from another folder: they would join the corpus
    with pytest.raises(CliError, match=f"holds the documents of {run['bench'].resolve()}/docs.jsonl, not of {other}"):
        rag_eval("--benchmark", str(other), "--workspace", str(run["workspace"]), "--out", str(tmp_path / "out"))
    catalog = duckdb.connect(str(run["workspace"] / "catalog.duckdb"), read_only=True)
    try:
        sources = catalog.execute("SELECT source, count(*) FROM documents WHERE status = 'current' GROUP BY 1").fetchall()
    finally:
        catalog.close()
    assert sources == [(str(run["bench"].resolve() / "docs.jsonl"), run["documents"])]


def test_a_workspace_another_process_holds_is_a_one_line_error(run, tmp_path):
    import subprocess
    import sys

    from pipelines.cli import CliError

    catalog = run["workspace"] / "catalog.duckdb"
    holder = subprocess.Popen([sys.executable, "-c", f"import duckdb, sys, time; c = duckdb.connect({str(catalog)!r}); "
                               "print('held', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CliError, match="lock"):
            rag_eval("--benchmark", str(run["bench"]), "--workspace", str(run["workspace"]), "--out", str(tmp_path))
    finally:
        holder.kill()
        holder.wait()


def test_the_benchmark_workspace_and_its_evaluation_materialise_as_one_partition(run, tmp_path):
    defs = evaluation_definitions(run["bench"].parent, workspace_root=tmp_path / "bench")
    workspace, evaluation, _ = defs.assets
    config = {"methods": ["longrag", "longrag-units", "elite"], "budgets": [500], "limit": 2,
              "out_root": str(tmp_path / "reports")}
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions("benchmarks", ["tiny"])
        result = dg.materialize([workspace, evaluation], partition_key="tiny", instance=instance,
                                resources={"embedder": EmbedderResource(threads=1),
                                           "llm": LLMResource(reader="extractive")},
                                run_config={"ops": {"retrieval_evaluation": {"config": config}}})
        assert result.success
        events = {e.asset_key.to_user_string(): e for e in result.get_asset_materialization_events()}
    assert set(events) == {"benchmark_workspace", "retrieval_evaluation"}
    metadata = {k: v.value for k, v in events["retrieval_evaluation"].materialization.metadata.items()}
    assert events["retrieval_evaluation"].materialization.partition == "tiny"
    assert (tmp_path / "bench" / "tiny" / "catalog.duckdb").exists()  # what the evaluation read
    assert "# Retrieval evaluation: tiny" in metadata["report"] and "## Which method to use" in metadata["report"]
    assert "data:image/png;base64," in metadata["report_full"] and metadata["use_at_500"]
    assert metadata["use_at_500"].endswith("questions") or "left out:" in metadata["use_at_500"]   # its count
    assert metadata["report_file"].endswith("report.md") and "://" not in metadata["report_file"]
    assert metadata["plot_quality"].startswith("![quality](data:image/png;base64,")
    assert metadata["reader"] == "none" and metadata["questions"] == 2
    for method in config["methods"]:  # the trend: one float per metric × method × budget
        assert 0.0 <= metadata[f"completeness/{method}@500"] <= 1.0
        assert 0.0 <= metadata[f"evidence_recall/{method}@500"] <= 1.0
    assert (tmp_path / "reports" / "tiny" / "summary.json").exists()


def test_the_evaluation_reads_its_benchmark_workspace_upstream(run):
    defs = evaluation_definitions(run["bench"].parent)
    deps = {spec.key.to_user_string(): {d.asset_key.to_user_string() for d in spec.deps}
            for asset in defs.assets for spec in asset.specs}
    assert deps == {"benchmark_workspace": set(), "retrieval_evaluation": {"benchmark_workspace"},
                    "workspace_evaluation": {"subchunk_index"}}


def test_the_sensor_adds_new_benchmark_folders_as_partitions_and_ingests_them_once(run, tmp_path):
    defs = evaluation_definitions(run["bench"].parent)
    (sensor,) = defs.sensors
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        first = sensor(dg.build_sensor_context(instance=instance))
        assert [r.partition_keys for r in first.dynamic_partitions_requests] == [["tiny"]]
        assert [r.partition_key for r in first.run_requests] == ["tiny"]
        instance.add_dynamic_partitions("benchmarks", ["tiny"])
        again = sensor(dg.build_sensor_context(instance=instance, cursor=first.cursor))
        assert again.run_requests == [] and again.dynamic_partitions_requests == []


def test_the_schedule_asks_for_every_known_benchmark_each_night(run, tmp_path):
    defs = evaluation_definitions(run["bench"].parent)
    schedule = next(s for s in defs.schedules if s.name == "nightly_evaluation")
    assert schedule.cron_schedule == "0 4 * * *"
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions("benchmarks", ["tiny"])
        requests = schedule(dg.build_schedule_context(instance=instance,
                                                      scheduled_execution_time=datetime(2026, 12, 1, 4)))
    assert [(r.partition_key, r.run_key) for r in requests] == [("tiny", "tiny@2026-12-01")]


@pytest.mark.slow
@pytest.mark.xdist_group("local-llm")  # one llama.cpp server per worker: every test that starts it shares a worker
def test_the_local_llm_answers_a_one_question_sample(tmp_path):
    pytest.importorskip("llama_cpp")
    bench, out = slice_of_hotpotqa(tmp_path / "benchmarks" / "two", 2), tmp_path / "local"
    assert rag_eval("--benchmark", str(bench), "--workspace", str(tmp_path / "ws"), "--methods", "longrag",
                    "--budgets", "500", "--reader", "local", "--answer-sample", "1", "--limit", "2",
                    "--out", str(out)) == 0
    results = rows(out)
    summary = json.loads((out / "summary.json").read_text())
    answered = [r for r in results if r["answered"]]
    assert summary["reader"].startswith("local:") and len(results) == 2 and len(answered) == 1
    assert answered[0]["llm_calls"] == 2 and answered[0]["input_tokens"] > answered[0]["tokens"]
    assert answered[0]["generate_s"] > 0 and answered[0]["f1"] is not None
