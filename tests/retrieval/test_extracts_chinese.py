"""longrag-extract on Chinese and mixed text: sentences end at full-width terminators with no spaces between words, a
question's terms are BM25's jieba words (Traditional folded onto Simplified), headers carry CJK titles, and over
mixed scripts the budget holds and every byte comes from a document the caller may read."""
import json

import pytest
from conftest import SAMPLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_longrag import assert_only_readable_bytes, retrieve, uncommitted

from pipelines.ingest_run import run_ingest
from rag.models.tokens import default_counter
from rag.query.methods import method as registered
from rag.retrieval.callers import Caller
from rag.retrieval.dense import Hit
from rag.retrieval.extracts import best_first
from rag.retrieval.request import Request, Tools
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.settings import IngestSettings
from rag.text.analysis import content_terms, has_han, lexical_tokens, sentence_spans
from rag.units.long_units import render_header

QUESTIONS = [q for q in map(json.loads, (SAMPLES / "questions-zh.jsonl").read_text().splitlines())
             if not q["qid"].startswith("en-")]
# Four sentences, no blank between any two; the second ends in a full-width exclamation mark, the third in a question mark.
TEXT = "边缘网关负责采集现场数据。设备断网后，遥测数据写入本地缓存，最多保存七天！网络恢复后按顺序补传吗？日志每天轮换。"
SPANS = [(0, 13), (13, 37), (37, 49), (49, 56)]


def terms(question: str) -> frozenset[str]:
    return frozenset(content_terms(question))


def test_chinese_sentences_end_at_full_width_terminators_and_the_one_sharing_most_terms_is_shown_first():
    hit = Hit("u@1", "d", 0, 13, 49, 0.9)  # the sub-chunk holds the second and third sentences
    order, shown = best_first(TEXT, (0, len(TEXT)), hit, terms("设备断网后缓存能保存多久？"))
    assert sorted(order) == SPANS and [TEXT[s:e][-1] for s, e in SPANS] == list("。！？。")
    # 设备 断网 后 缓存 保存 in the second; the lead (what the member is about); 后 in the third, inside the sub-chunk
    assert order[:shown] == [SPANS[1], SPANS[0], SPANS[2]]
    nothing = best_first(TEXT, (0, len(TEXT)), hit, terms("谁创立了公司？"))
    assert nothing == ([SPANS[1], SPANS[0], SPANS[2], SPANS[3]], 2)  # no word shared: the sub-chunk's first, the lead


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q["qid"])
def test_a_chinese_questions_terms_are_bm25s_jieba_words_not_its_blank_separated_runs(q):
    han = {t for t in content_terms(q["question"]) if has_han(t)}
    assert han == {t for t in lexical_tokens(q["question"]) if has_han(t)}  # the lexical channel's own words
    assert len(han) > len([w for w in q["question"].split() if has_han(w)])  # more than whitespace would give


def test_a_traditional_question_picks_the_same_sentences_of_simplified_text_and_the_other_way_round():
    hit = Hit("u@1", "d", 0, 13, 49, 0.9)
    simplified = best_first(TEXT, (0, len(TEXT)), hit, terms("设备断网后缓存能保存多久？"))
    assert best_first(TEXT, (0, len(TEXT)), hit, terms("設備斷網後緩存能保存多久？")) == simplified
    traditional = "邊緣閘道負責採集現場資料。設備斷網後，遙測資料寫入本地緩存，最多保存七天！日誌每天輪換。"
    whole = Hit("u@1", "d", 0, 0, len(traditional), 0.9)
    order, _ = best_first(traditional, (0, len(traditional)), whole, terms("设备断网后缓存能保存多久？"))
    assert traditional[slice(*order[0])] == "設備斷網後，遙測資料寫入本地緩存，最多保存七天！"


def test_in_mixed_text_english_and_chinese_terms_both_count_and_each_scripts_terminators_end_a_sentence():
    text = "The gateway 网关的 ETH0 默认 IP 是 192.168.10.1。Reboot it after 更新固件! 然后检查 rotated logs。"
    whole = Hit("u@1", "d", 0, 0, len(text), 0.9)
    order, shown = best_first(text, (0, len(text)), whole, terms("How are logs rotated after 更新固件?"))
    assert [text[s:e] for s, e in sorted(order)] == ["The gateway 网关的 ETH0 默认 IP 是 192.168.10.1。",
                                                     "Reboot it after 更新固件!", "然后检查 rotated logs。"]
    # 更新 固件 and "rotated logs" (stemmed as the question's) tie at two terms: the earlier first, then the lead
    assert [text[s:e] for s, e in order[:shown]] == ["Reboot it after 更新固件!", text[:42], "然后检查 rotated logs。"]


@pytest.fixture(scope="module")
def zh(tmp_path_factory, multilingual):
    """(catalog, index) of samples/corpus-zh with the multilingual embedder; read-only (BEGIN … ROLLBACK to change)."""
    ws = tmp_path_factory.mktemp("zh-extracts")
    run_ingest(IngestSettings(workspace=ws, sources=[SAMPLES / "corpus-zh"], embedder="use-multilingual"))
    catalog = Catalog(ws / "catalog.duckdb")
    yield catalog, SubchunkIndex(ws / "lancedb")
    catalog.close()


@pytest.mark.parametrize("q", QUESTIONS, ids=lambda q: q["qid"])
def test_each_item_starts_with_its_cjk_titled_header_and_the_answer_is_shown_at_600_tokens(zh, multilingual, q):
    for budget in (300, 600):  # the sample's documents are 140-260 tokens: the head whole, then others as excerpts
        result = retrieve(zh, multilingual, q["question"], q["groups"], budget, "longrag-extract")
        assert result.tokens <= budget and result.items
        for item in result.items:
            assert has_han(item.title)
            assert item.text.startswith(render_header(item.title, item.doc_id, item.doc_version, item.part))
    # the two-document question too: its second document as an excerpt (~1 word piece per Han character, so a
    # Chinese excerpt costs about twice an English one of the same length and at 300 it does not fit beside the head)
    assert any(a in "".join(i.text for i in result.items) for a in q["answers"]), q["answers"]


def shared(text: str, spans: list[tuple[int, int]], question: str) -> list[int]:
    """How many Chinese words each of these sentences shares with the question."""
    return [len({t for t in terms(question) & terms(text[s:e]) if has_han(t)}) for s, e in spans]


def test_a_member_shown_in_part_shows_its_matched_sentence_sharing_the_most_chinese_words_with_the_question(
        zh, multilingual):
    snap, tools, checked = uncommitted(*zh), Tools(multilingual, default_counter()), 0
    for q, budget in [(q, b) for q in QUESTIONS for b in (300, 450, 600)]:
        ranked = registered("longrag").rank(snap, Request(Caller(frozenset(q["groups"])), q["question"], 4000), tools)
        result = registered("longrag-extract").pack(snap, ranked, budget, tools)
        for item in result.items:
            text = snap.texts([(item.doc_id, item.doc_version)])[(item.doc_id, item.doc_version)][1]
            if item.ranges == [e for e in ranked.items if e.doc_id == item.doc_id][0].ranges:
                continue  # shown whole
            at = text.index(item.matched)
            matched = [(s, e) for s, e in sentence_spans(text) if s < at + len(item.matched) and e > at]
            shown = [(s, e) for s, e in sentence_spans(text) if any(lo <= s and e <= hi for lo, hi in item.ranges)]
            if max(shared(text, matched, q["question"])) > 0:
                checked += 1
                assert max(shared(text, shown, q["question"])) == max(shared(text, matched, q["question"])), \
                    (q["qid"], budget, [text[s:e] for s, e in shown])
    assert checked >= 3  # not a vacuous pass: members whose match shares words are shown in part at these budgets


MIXED = ["缓存", "設備", "断网", "日誌", "补传", "保险丝", "網路燈", "cache", "MQTT", "ETH0", "message_id", "500", "2 A",
         "多久？", "what", "是", "。"]


# Real query embeddings (multilingual), LanceDB searches and catalog reads, with ACLs revoked inside a rolled-back
# transaction: the oracle of LongRAG's rule-1 property (tests/retrieval/test_longrag.py) over Chinese and mixed text.
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(groups=st.sets(st.sampled_from(["edge-ops", "installers", "nobody-else"]), min_size=1, max_size=2),
       words=st.lists(st.sampled_from(MIXED), min_size=1, max_size=5),
       joiner=st.sampled_from(["", " "]),
       budget=st.integers(min_value=20, max_value=3000),
       revoked=st.sets(st.sampled_from(["zh-telemetry-cache", "zh-log-rotation", "zh-resync-dedup",
                                        "zh-field-checklist", "zh-power-wiring", "zh-network-init"]), max_size=3))
def test_over_mixed_scripts_no_byte_from_an_unreadable_document_and_the_budget_never_exceeded(zh, multilingual, groups,
                                                                                             words, joiner, budget,
                                                                                             revoked):
    def run(sample, groups_, question, budget_):
        return retrieve(sample, multilingual, question, groups_, budget_, "longrag-extract")

    assert_only_readable_bytes(zh, multilingual, groups, [joiner.join(words)], budget, revoked, run)
