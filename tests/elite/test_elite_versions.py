"""Deleted and superseded versions are never scanned: their text never comes back (sample corpus)."""
import pytest
from elite_helpers import HashEncoder

from rag.elite import EliteConfig, elite_retrieve, explorer_for
from rag.retrieval.callers import Caller
from rag.store.catalog import Catalog
from rag.store.publish import publish_documents
from rag.store.settings import IngestSettings

EVERYONE = Caller(frozenset({"field-engineering", "support", "partners", "security-team", "everyone"}))
CONFIG = EliteConfig(noise_samples=1)


def ask(catalog, question, budget=8000):
    return elite_retrieve(catalog, EVERYONE, question, budget, explorer_for(embedder=HashEncoder(), config=CONFIG))


@pytest.fixture
def catalog(corpus, workspace):
    catalog = Catalog(workspace / "catalog.duckdb")
    publish_documents(catalog, IngestSettings(sources=[str(corpus)]))
    return catalog


def test_facts_of_superseded_2025_versions_never_come_back(catalog):
    questions = {"How many hours does the offline cache hold and how large is the partition?": ["72 hours", "2 GB"],
                 "At what size do logs rotate and how many rotated files are kept with gzip?": ["50 MB", "gzip"],
                 "How long is the commissioning token valid, and which form records it?": ["3 days", "NW-F-031"],
                 "Which signature does the firmware image use, RSA-3072?": [".nwfw", "180 MB"]}
    for question, old_facts in questions.items():
        result = ask(catalog, question)
        assert result.items, question
        text = result.context()
        assert not any(fact in text for fact in old_facts), question
        assert all(i.doc_version != "2025" for i in result.items)
    counted = ask(catalog, "How many times does the phrase '72 hours' appear?")
    assert counted.trace["direct_answer"]["count"] == 0


def test_a_deleted_file_is_invisible_once_published_again(catalog, corpus):
    question = "How do I wipe a gateway securely and which return reason code applies?"
    assert any(i.doc_id == "decommissioning-gateways" for i in ask(catalog, question).items)
    next(corpus.rglob("decommissioning*.md")).unlink()
    publish_documents(catalog, IngestSettings(sources=[str(corpus)]))
    result = ask(catalog, question)
    assert all(i.doc_id != "decommissioning-gateways" for i in result.items)
    assert "RC-09" not in result.context() and "factory-wipe --secure" not in result.context()
    assert ask(catalog, "How many times does 'RC-09' appear?").trace["direct_answer"]["count"] == 0


def test_the_sample_corpus_scope_follows_the_acl(catalog):
    support = ask_as(catalog, Caller(frozenset({"support"})), "How long are device certificates valid?")
    assert all(i.doc_id != "certificate-rotation" for i in support.items)
    security = ask_as(catalog, Caller(frozenset({"security-team"})), "How long are device certificates valid?")
    assert security.items[0].doc_id == "certificate-rotation"


def ask_as(catalog, caller, question):
    return elite_retrieve(catalog, caller, question, 4000, explorer_for(embedder=HashEncoder(), config=CONFIG))
