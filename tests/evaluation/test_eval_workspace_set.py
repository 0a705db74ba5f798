"""The sample corpus's own question set, evaluated on its real published workspace, each question asked as its user."""
import json

import pytest
from conftest import SAMPLES
from test_eval_end_to_end import rag_eval
from test_longrag import publish

from rag.evaluation.expect import expectation_met
from rag.evaluation.questions import EvalQuestion, load_questions
from rag.retrieval.callers import load_users
from rag.retrieval.context import ContextItem, RetrievalResult

METHODS = ("longrag", "longrag-units", "elite", "hybrid", "shortchunk")
QUESTIONS, USERS = SAMPLES / "questions.jsonl", SAMPLES / "users.yaml"


@pytest.fixture(scope="module")
def run(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("sample-set")
    catalog, _ = publish(root / "ws", [SAMPLES / "corpus"], embedder)
    catalog.close()  # the evaluation reads the published snapshot; nothing holds the writer's file
    code = rag_eval("--questions", str(QUESTIONS), "--users-file", str(USERS), "--workspace", str(root / "ws"),
                    "--methods", ",".join(METHODS), "--budgets", "2000", "--out", str(root / "out"))
    rows = [json.loads(line) for line in (root / "out" / "results.jsonl").open()]
    return {"code": code, "rows": rows, "out": root / "out", "ws": root / "ws",
            "summary": json.loads((root / "out" / "summary.json").read_text())}


def test_the_set_has_every_kind_of_question_the_issue_asks_for():
    qs = load_questions(QUESTIONS)
    kinds = {q.kind for q in qs}
    assert len(qs) >= 40 and {"bridge", "version", "permission", "counting"} <= kinds
    assert sum(q.expect == "not_found" for q in qs) >= 5 and sum(q.expect == "absent_version" for q in qs) >= 5
    assert len({q.asked_as for q in qs}) >= 5  # asked as different users
    ids = {d.doc_id for d in sample_documents()}
    assert all(set(q.gold_doc_ids) <= ids for q in qs)  # every gold id names a real document


def sample_documents():
    """Every document (all versions) of the sample corpus, as the loader reads it."""
    from rag.sources.loaders import load_sources

    return load_sources([str(SAMPLES / "corpus")]).documents


@pytest.mark.slow
def test_every_question_is_asked_as_its_user_by_every_method(run):
    assert run["code"] == 0
    assert len(run["rows"]) == len(load_questions(QUESTIONS)) * len(METHODS)
    users = load_users(USERS)
    acl = {d.doc_id: set(d.acl) for d in sample_documents()}
    for row in run["rows"]:
        groups = users[row["asked_as"]].groups if row["asked_as"] in users else set(row["asked_as"].split(","))
        assert all(acl[d] & groups for d in row["retrieved_doc_ids"]), row  # only what the asker may read


@pytest.mark.slow
def test_permission_scoped_questions_show_no_byte_of_the_forbidden_documents(run):
    not_found = [r for r in run["rows"] if r["expect"] == "not_found"]
    assert not_found and all(r["expectation_met"] is True for r in not_found)
    gold = {q.qid: set(q.gold_doc_ids) for q in load_questions(QUESTIONS)}
    assert all(not gold[r["qid"]] & set(r["retrieved_doc_ids"]) for r in not_found)
    assert all(r["evidence_recall"] is None and r["complete"] is None for r in not_found)


@pytest.mark.slow
def test_version_sensitive_questions_get_the_2026_rule_and_never_the_2025_text(run):
    versioned = [r for r in run["rows"] if r["expect"] == "absent_version"]
    assert versioned and all(r["expectation_met"] is True for r in versioned)
    # The current version is found, not just the old one withheld. longrag-units is held to the rule only: its
    # whole units (up to 4K tokens) rarely fit a 2K budget, which is the paper's method's trade-off, not a leak.
    for method in set(METHODS) - {"longrag-units"}:
        mine = [r for r in versioned if r["method"] == method]
        assert sum(r["complete"] for r in mine) >= 0.8 * len(mine), method
    assert run["summary"]["expectations"] == []


@pytest.mark.slow
def test_the_report_has_figures_by_question_type_and_preparation_for_every_method(run):
    summary = run["summary"]
    assert {c["type"] for c in summary["by_type"]} >= {"bridge", "version", "permission", "counting", "single"}
    for method in METHODS:
        parts = summary["methods"][method]["prepare_parts"]
        assert parts["catalog_open"] > 0
        assert ("index_build" in parts) == (method != "elite")
    assert summary["methods"]["elite"]["prepare_parts"]["sentence_store"] > 0
    assert summary["methods"]["longrag"]["prepare_parts"]["lexical_index"] > 0
    assert (run["out"] / "by_type.png").stat().st_size > 0


def item(doc_id, version, text):
    return ContextItem(doc_id, version, "t", text, 1, ((0, len(text)),), 1.0)


def test_the_expectation_check_catches_a_leaked_line_even_under_another_documents_name():
    secret = "Device certificates are valid for 13 months and rotate 60 days before expiry."
    q = EvalQuestion("p", "How long are certificates valid?", "", ("certificate-rotation",), expect="not_found")
    forbidden = {("certificate-rotation", "2026"): f"# Certificates\n{secret}\n"}
    clean = RetrievalResult("m", 100, [item("quick-start-guide", "2026", "Plug in the gateway.")])
    leaked = RetrievalResult("m", 100, [item("quick-start-guide", "2026", f"Plug in.\n{secret}")])
    named = RetrievalResult("m", 100, [item("certificate-rotation", "2026", "header only")])
    shown = {("quick-start-guide", "2026"): "Plug in the gateway."}
    assert expectation_met(q, clean, forbidden, shown) is True
    assert expectation_met(q, leaked, forbidden, shown) is False
    assert expectation_met(q, named, forbidden, {}) is False
    # A line the shown document really contains too is shared text, not a leak.
    assert expectation_met(q, leaked, forbidden, {("quick-start-guide", "2026"): f"Plug in.\n{secret}"}) is True


def test_an_absent_version_question_fails_when_the_old_version_is_shown():
    q = EvalQuestion("v", "How long does the cache hold data?", "7 days", ("edge-offline-cache",),
                     expect="absent_version", absent_version="2025")
    forbidden = {("edge-offline-cache", "2025"): "The cache holds 72 hours of telemetry on the gateway."}
    old = RetrievalResult("m", 100, [item("edge-offline-cache", "2025", "The cache holds 72 hours of telemetry.")])
    new = RetrievalResult("m", 100, [item("edge-offline-cache", "2026", "The cache holds 7 days of telemetry.")])
    assert expectation_met(q, old, forbidden, {}) is False
    assert expectation_met(q, new, forbidden, {("edge-offline-cache", "2026"): "The cache holds 7 days."}) is True


def test_the_question_set_is_found_beside_the_sources_not_inside_them():
    from assets.evaluation import questions_beside

    assert questions_beside([str(SAMPLES / "corpus")]) == QUESTIONS
    assert questions_beside([str(SAMPLES / "bad")]) == QUESTIONS  # samples/ holds it for both folders
    assert questions_beside([str(SAMPLES / "corpus" / "security")]) is None


@pytest.mark.slow
def test_the_workspace_evaluation_asset_reads_the_production_workspace(run, tmp_path):
    import dagster as dg

    from assets.evaluation import evaluation_definitions
    from resources import EmbedderResource, ReadSideResource, SourceSettings
    from resources.llm import LLMResource

    asset = next(a for a in evaluation_definitions(tmp_path / "no-benchmarks").assets
                 if a.key.to_user_string() == "workspace_evaluation")
    config = {"methods": ["longrag", "elite"], "budgets": [1000], "limit": 6, "out_root": str(tmp_path / "out")}
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        result = dg.materialize([asset], instance=instance, run_config={"ops": {"workspace_evaluation": {
            "config": config}}}, resources={
            "read_side": ReadSideResource(workspace=str(run["ws"]), lance_uri=str(run["ws"] / "lancedb")),
            "source_settings": SourceSettings(sources=[str(SAMPLES / "corpus")]),
            "embedder": EmbedderResource(threads=1), "llm": LLMResource(reader="extractive")})
        assert result.success
        (event,) = result.get_asset_materialization_events()
    metadata = {k: v.value for k, v in event.materialization.metadata.items()}
    assert metadata["questions"] == 6 and metadata["expectation_failures"] == 0
    assert metadata["documents"] == 37 and metadata["workspace_checks_passed"] is True
    assert 0.0 <= metadata["completeness/longrag@1000"] <= 1.0
