"""No returned byte comes from a document the caller may not read, whatever the documents, ACLs and question."""
import json
import tempfile
from pathlib import Path

import pytest
from elite_helpers import HashEncoder, catalog_with, doc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag.elite import EliteConfig, elite_retrieve, explorer_for
from rag.retrieval.callers import Caller

GROUPS = ["sales", "support", "security", "field"]
WORDS = ["cache", "gateway", "alarm", "rotate", "firmware", "token", "harbour", "valve", "relay", "modem"]
FAST = EliteConfig(top_k=5, neighbours=1, max_rounds=2, noise_samples=1, importance_chunks=2)


def secret(i: int) -> str:
    """A word only document i holds: finding it in the output proves that document leaked.

    Secrets differ in every one of 12 letters, so character noise (importance) cannot turn one into another.
    """
    return "".join(chr(97 + (i * 7 + k * 3) % 26) for k in range(12))


documents = st.lists(
    st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12),
              st.lists(st.sampled_from(GROUPS), min_size=0, max_size=2, unique=True)),
    min_size=1, max_size=8)
questions = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(lambda ws: " ".join(ws) + "?"),
    st.sampled_from(WORDS).map(lambda w: f"How many times does the word '{w}' appear?"))


@pytest.mark.slow                      # 200 real catalogs: ~15 s
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.lists(st.sampled_from(GROUPS), min_size=1, max_size=2, unique=True), questions,
       st.sampled_from([30, 120, 4000]))
def test_nothing_returned_comes_from_a_document_the_caller_may_not_read(spec, groups, question, budget):
    docs = [doc(f"doc-{i}", ". ".join(f"{w} {secret(i)}" for w in words) + ".", acl=acl)
            for i, (words, acl) in enumerate(spec)]
    caller = Caller(frozenset(groups))
    with tempfile.TemporaryDirectory() as tmp:
        catalog = catalog_with(Path(tmp) / "catalog.duckdb", docs)
        result = elite_retrieve(catalog, caller, question, budget, explorer_for(embedder=HashEncoder(), config=FAST))
        catalog.close()
    readable = {d.doc_id: d for d in docs if caller.may_read(d.acl)}
    hidden = [secret(i) for i, d in enumerate(docs) if d.doc_id not in readable]
    for item in result.items:
        assert item.doc_id in readable
        start, end = item.ranges[0]
        assert item.text.endswith(readable[item.doc_id].text[start:end])
    trace = result.trace
    returned = json.dumps([[i.text, i.matched] for i in result.items]) + json.dumps(trace["direct_answer"]) + \
        json.dumps([[r["hits"], r["chunks"], r["judge"], [t for t in r["terms"] if t["kind"] in ("breadth", "depth")]]
                    for r in trace["rounds"]])
    assert not any(s in returned for s in hidden)
    assert result.tokens <= budget


def test_an_acl_revoked_in_the_catalog_hides_the_document_at_once(tmp_path):
    """The sentence store is cached; a changed ACL column alone must still invalidate what a caller sees."""
    from conftest import SAMPLES

    from rag.store.catalog import Catalog
    from rag.store.publish import publish_documents
    from rag.store.settings import IngestSettings

    catalog = Catalog(tmp_path / "catalog.duckdb")
    publish_documents(catalog, IngestSettings(sources=[str(SAMPLES / "corpus")]))
    caller, question = Caller(frozenset({"support"})), "Which error code means the cache is full?"
    before = elite_retrieve(catalog, caller, question, 2000, explorer_for(embedder=HashEncoder(), config=FAST))
    assert "error-codes-reference" in {i.doc_id for i in before.items}
    catalog.con.execute("UPDATE documents SET acl = ['security-team'] WHERE doc_id = 'error-codes-reference'")
    after = elite_retrieve(catalog, caller, question, 2000, explorer_for(embedder=HashEncoder(), config=FAST))
    assert "error-codes-reference" not in {i.doc_id for i in after.items}
