"""LongRAG's LLM-written bridge hop (longrag-llm): what the LLM reads of hop one (readable documents only, the
question's best sentences), and the real local model naming the film's star so the next hop reaches her."""
import importlib.util
import os

import pytest
import test_hop_bridges
from test_hop_bridges import DOCS, QUESTION
from test_longrag import uncommitted

from rag.models.tokens import default_counter
from rag.query.methods import method as registered
from rag.retrieval.callers import Caller
from rag.retrieval.llm_bridge import (
    BridgeConfig,
    PromptCache,
    bridge_prompt,
    cleaned,
    copied_example,
    llm_bridges,
    passages,
)
from rag.retrieval.longrag import LongRAGConfig, longrag_candidates, pack_ranked
from rag.retrieval.request import Request, Tools

needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"),
                                 reason="llama-cpp-python not installed (pip install -e '.[local-llm]'); CI runs it")
BENCH, ARCHIVISTS = Caller(frozenset({"bench"})), Caller(frozenset({"archivists"}))


films = test_hop_bridges.films  # the film, its star and the distractor actresses


def hop_one(snap, embedder, caller):
    return longrag_candidates(snap, Request(caller, QUESTION, 4000), Tools(embedder, default_counter()),
                              LongRAGConfig(hops=1)).items


def test_the_llm_reads_only_documents_the_caller_may_read_and_their_sentences_closest_to_the_question(films, embedder):
    snap = uncommitted(*films)
    read = passages(snap, QUESTION, hop_one(snap, embedder, BENCH), BridgeConfig(seeds=10))
    titles = [t for t, _ in read]
    assert titles[0] == "The Glass Orchard" and "Northwind Pictures" not in titles
    assert len(titles) == len({d for d, _, _, acl in DOCS if "bench" in acl})
    varga = dict(read)["Ilse Varga"]
    assert varga == "Ilse Varga is an actress. She was born in Debrecen and trained at its theatre."
    one = passages(snap, QUESTION, hop_one(snap, embedder, BENCH), BridgeConfig(seeds=1, sentences=1))
    assert one == [("The Glass Orchard", DOCS[0][2])]
    assert "Northwind Pictures" in dict(passages(snap, QUESTION, hop_one(snap, embedder, ARCHIVISTS),
                                                 BridgeConfig(seeds=10)))


def test_the_prompt_lists_the_passages_after_the_question_and_the_reply_loses_its_labels():
    user = bridge_prompt(QUESTION, [("A", "a."), ("B", "b.")])[1]["content"]
    assert user.endswith(f"Question: {QUESTION}\nPassage: A: a.\nPassage: B: b.\nFound:")
    reply = ' the star is Ilse Varga.\n\nNext question: "Where was Ilse Varga born?"\nFound: more'
    assert cleaned(reply) == "the star is Ilse Varga. Where was Ilse Varga born?"
    assert cleaned("Found: Ilse Varga") == "Ilse Varga" and cleaned(" \n") == ""
    assert copied_example("The spouse of Steven Spielberg is Ilse Varga.") and not copied_example(cleaned(reply))


def test_longrag_llm_refuses_without_a_model_in_one_line(films, embedder):
    with pytest.raises(ValueError, match="^method 'longrag-llm' needs an LLM"):
        registered("longrag-llm").run(uncommitted(*films), Request(BENCH, QUESTION, 1000),
                                      Tools(embedder, default_counter()))


@pytest.mark.slow
@needs_llama
@pytest.mark.xdist_group("local-llm")
def test_the_local_model_names_the_star_and_its_hop_reaches_her(films, embedder):
    """With one hop and names in sentence order LongRAG misses the star; the LLM, reading the film's paragraph,
    names her, and the hop for its query ranks her document second, right after the film's."""
    from rag.answer.llm import chat_model

    model, calls = chat_model("local", timeout=120, max_retries=0), []
    complete = model.complete
    model.complete = lambda *a, **k: calls.append(1) or complete(*a, **k)
    snap, tools = uncommitted(*films), Tools(embedder, default_counter())
    req, config = Request(BENCH, QUESTION, 4000, model=model), LongRAGConfig(hops=1)
    bridges = llm_bridges(model, BridgeConfig(seeds=1))
    assert "Ilse Varga" in bridges(snap, QUESTION, hop_one(snap, embedder, BENCH))[0]
    ranked = longrag_candidates(snap, req, tools, config, bridges)
    assert len(calls) == 1  # the same prompt again: the cached reply
    assert ranked.trace["queries"] == 2
    budget = sum(i.tokens for i in ranked.items[:3])  # rank by rank: the film, hop one's next actress, the star
    assert [i.doc_id for i in pack_ranked(snap, ranked, budget).items] == ["film", "a2", "varga"]
    plain = longrag_candidates(snap, req, tools, config)
    assert "varga" not in [i.doc_id for i in pack_ranked(snap, plain, budget).items]
    default = registered("longrag").rank(snap, req, tools).trace["queries"]
    assert registered("longrag-llm").rank(snap, req, tools).trace["queries"] == default + 1


def test_the_prompt_cache_keeps_the_latest_replies():
    class Echo:
        name, calls = "echo", 0

        def complete(self, messages, max_tokens):
            self.calls += 1
            return type("Done", (), {"text": messages[0]["content"]})()

    cache, echo = PromptCache(size=2), Echo()
    for text in ("a", "b", "a", "c", "a", "b"):
        assert cache.reply(echo, [{"role": "user", "content": text}], 8) == text
    assert echo.calls == 4  # a, b, c, then b again: it was the oldest when c came
