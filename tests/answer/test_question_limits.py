"""Every per-question cost is bounded; an over-long question gets a one-line error from
the core, whichever method or embedder it reaches first, before any work on the corpus."""
import pytest

from rag.elite import elite_retrieve, explorer_for
from rag.retrieval.callers import Caller
from rag.retrieval.lexical import lexical_index
from rag.sources.documents import Document
from rag.store.catalog import Catalog
from rag.store.source_log import sync_documents
from rag.text.analysis import MAX_QUESTION_CHARS, QuestionTooLong

LONG = "How many times does the word " + "cache " * 20_000 + "appear?"   # ~120 KB


@pytest.fixture
def catalog(tmp_path):
    catalog = Catalog(tmp_path / "c.duckdb")
    source = str(tmp_path / "a.md")
    sync_documents(catalog, catalog.begin_publish([source]), [Document(
        doc_id="a", title="Cache", text="The cache holds telemetry for seven days.", version="1", acl=("staff",),
        source=source, source_path=source)], [], [source])
    yield catalog
    catalog.close()


def test_elite_refuses_an_over_long_question(catalog, embedder):
    with pytest.raises(QuestionTooLong, match=f"the limit is {MAX_QUESTION_CHARS:,}"):
        elite_retrieve(catalog, Caller(frozenset({"staff"})), LONG, 1000, explorer_for(embedder=embedder))


def test_the_bm25_channel_refuses_an_over_long_question(catalog):
    with pytest.raises(QuestionTooLong):
        lexical_index(catalog).search(LONG, 10)


def test_both_embedders_refuse_to_embed_an_over_long_question(embedder, multilingual):
    for model in (embedder, multilingual):
        with pytest.raises(QuestionTooLong) as err:
            model.encode_query(LONG)
        assert "\n" not in str(err.value)


def test_a_question_at_the_limit_is_answered(catalog, embedder):
    question = ("what does the cache hold " * 100)[:MAX_QUESTION_CHARS]
    result = elite_retrieve(catalog, Caller(frozenset({"staff"})), question, 1000, explorer_for(embedder=embedder))
    assert [i.doc_id for i in result.items] == ["a"]
