"""The Chinese sample corpus through the real pipeline (multilingual embedder): every method finds the answer
document first, sees only the current rule and only what the caller may read; English questions find Chinese
documents; counting works in Chinese."""
import json

import pytest
from conftest import SAMPLES

from pipelines.ingest_run import run_ingest
from rag.elite import elite_retrieve, explorer_for
from rag.query.methods import method as registered
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller
from rag.retrieval.lexical import lexical_index
from rag.retrieval.longrag import LongRAGConfig, config_for
from rag.retrieval.request import Request, Tools
from rag.store.settings import IngestSettings

QUESTIONS = {q["qid"]: q for q in map(json.loads, (SAMPLES / "questions-zh.jsonl").read_text().splitlines())}
CHINESE = [q for q in QUESTIONS.values() if not q["qid"].startswith("en-")]
BUDGET = 2000


@pytest.fixture(scope="module")
def zh(tmp_path_factory):
    ws = tmp_path_factory.mktemp("zh") / "workspace"
    counts = run_ingest(IngestSettings(workspace=ws, sources=[SAMPLES / "corpus-zh"], embedder="use-multilingual"))
    assert counts["checks_passed"] and counts["quarantined"] == 0
    reader = Workspace(ws)  # questions are embedded in the workspace's own space
    yield reader.snapshot().catalog, reader, reader.embedder
    reader.close()


def caller(q):
    return Caller(frozenset(q["groups"]))


def methods(zh, q, groups=None):
    """Items per method for question q, asked as `groups` (default: the question's own caller)."""
    _, reader, _ = zh
    who = Caller(frozenset(groups)) if groups else caller(q)
    return {m: reader.retrieve(m, who, q["question"], BUDGET).items for m in ("elite", "longrag")}


def test_the_workspace_records_the_multilingual_embedder(zh):
    catalog, reader, embedder = zh
    index = reader.snapshot().index
    assert catalog.setting("embedder") == index.embedder == embedder.name == "use-multilingual"
    assert index.dimension == 512


@pytest.mark.parametrize("q", CHINESE, ids=lambda q: q["qid"])
def test_elite_and_longrag_put_an_answer_document_first_and_every_one_within_the_budget(zh, q):
    for method, items in methods(zh, q).items():
        ids = [i.doc_id for i in items]
        assert ids and ids[0] in q["gold_doc_ids"], (method, ids)
        assert set(q["gold_doc_ids"]) <= set(ids), (method, ids)


@pytest.mark.parametrize("q", CHINESE, ids=lambda q: q["qid"])
def test_bm25_over_jieba_words_ranks_an_answer_document_first(zh, q):
    ranked = list(lexical_index(zh[0]).search(q["question"], 10))
    assert ranked[0] in q["gold_doc_ids"]
    assert set(q["gold_doc_ids"]) <= set(ranked[:3])


def test_the_version_sensitive_question_sees_only_the_current_rule(zh):
    for method, items in methods(zh, QUESTIONS["zh-cache-retention"]).items():
        cache = [i for i in items if i.doc_id == "zh-telemetry-cache"]
        assert cache and all(i.doc_version == "2026" for i in cache), method
        assert "七天" in cache[0].text and all("三天" not in i.text for i in items), method


def test_the_permission_scoped_question_returns_nothing_from_the_installers_group_to_edge_ops(zh):
    q = QUESTIONS["zh-default-ip"]
    for method, items in methods(zh, q, groups=["edge-ops"]).items():
        assert not {"zh-network-init", "zh-power-wiring"} & {i.doc_id for i in items}, method
        assert all("192.168.10.1" not in i.text for i in items), method
    assert [i.doc_id for i in methods(zh, q)["elite"]][0] == "zh-network-init"


def test_an_english_question_finds_the_chinese_document_through_the_multilingual_space(zh):
    catalog, reader, _ = zh
    q = QUESTIONS["en-cross-lingual-cache"]
    assert lexical_index(catalog).search(q["question"], 10) == {}     # no shared words: dense retrieval alone
    dense = reader.retrieve("shortchunk", caller(q), q["question"], BUDGET)
    assert dense.items[0].doc_id == "zh-telemetry-cache"
    assert methods(zh, q)["longrag"][0].doc_id == "zh-telemetry-cache"


def test_a_chinese_counting_question_is_answered_directly_over_readable_current_text(zh):
    catalog, _, embedder = zh
    result = elite_retrieve(catalog, Caller(frozenset({"edge-ops"})), "“缓存”这个词出现了几次？", BUDGET,
                            explorer_for(embedder=embedder))
    answer = result.trace["direct_answer"]
    # 6 in the 2026 cache document (its 2025 version is superseded), 2 in log rotation, 1 in re-sync.
    assert answer["count"] == 9
    assert {(d["doc_id"], d["version"], d["count"]) for d in answer["documents"]} == {
        ("zh-telemetry-cache", "2026", 6), ("zh-log-rotation", "2026", 2), ("zh-resync-dedup", "2026", 1)}
    assert answer["answer"] == "“缓存”在 3 份可读文档中出现 9 次。"


def test_a_question_in_traditional_characters_finds_what_its_simplified_form_finds(zh):
    catalog, reader, _ = zh
    q = QUESTIONS["zh-cache-retention"]
    traditional = "設備斷網後緩存能保存多久？"   # the Simplified documents are segmented to the same words
    assert list(lexical_index(catalog).search(traditional, 3)) == list(lexical_index(catalog).search(q["question"], 3))
    assert [i.doc_id for i in reader.retrieve("elite", caller(q), traditional, BUDGET).items][0] == "zh-telemetry-cache"


def test_longrag_in_a_multilingual_workspace_ranks_with_the_weights_tuned_for_that_embedder(zh):
    _, reader, embedder = zh
    q = QUESTIONS["zh-full-partition-resync"]
    snap = reader.snapshot()
    served = reader.retrieve("longrag", caller(q), q["question"], BUDGET).items
    request = Request(caller(q), q["question"], BUDGET)
    tuned = registered("longrag").run(snap, request, Tools(embedder, reader.counter)).items
    minilm = registered("longrag").run(snap, request, Tools(embedder, reader.counter, longrag=LongRAGConfig())).items
    assert config_for(embedder.name) != LongRAGConfig() == config_for("minilm")
    assert [(i.doc_id, i.score) for i in served] == [(i.doc_id, i.score) for i in tuned]
    assert [i.score for i in served] != [i.score for i in minilm]
