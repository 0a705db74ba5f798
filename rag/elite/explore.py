"""The ELITE loop: scope, plan, collect, importance, judge, explore again, organise; every step traced."""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from rag.elite.collect import (
    Chunk,
    Term,
    coverage,
    expand,
    expansion_candidates,
    score_sentences,
    term_weights,
    terms_from,
    top_k,
)
from rag.elite.config import EliteConfig
from rag.elite.counting import count_occurrences, direct_answer
from rag.elite.importance import Encoder, importance
from rag.elite.policy import Evidence, Verdict
from rag.elite.sentences import STORES, SentenceStore
from rag.models.tokens import TokenCounter
from rag.retrieval.callers import Caller
from rag.retrieval.context import ContextItem
from rag.store.catalog import Catalog
from rag.text.analysis import check_question
from rag.units.long_units import render_header


@dataclass
class Exploration:
    """Ranked, pruned candidates (not yet packed: the budget is applied last) and the trace so far."""

    candidates: list[ContextItem]
    trace: dict


@dataclass
class _Stages:
    seconds: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def __call__(self, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = round(self.seconds.get(stage, 0.0) + time.perf_counter() - start, 6)


@dataclass(frozen=True)
class Explorer:
    """What an exploration uses besides the question: the term policy (LLM or offline), the encoder that scores
    importance (None: not scored), the budget's token counter and the settings."""

    policy: object
    encoder: Encoder | None
    counter: TokenCounter
    config: EliteConfig = EliteConfig()


@dataclass(frozen=True)
class _Round:
    """What one round searched, found and decided, for the trace."""

    number: int
    terms: list[Term]
    hits: np.ndarray
    scores: np.ndarray
    chunks: list[Chunk]
    together: float
    focus: float
    verdict: Verdict
    sufficient: bool
    rule: str


def explore(catalog: Catalog, caller: Caller, question: str, explorer: Explorer,
            within: frozenset[str] | None = None) -> Exploration:
    """Everything but packing; `pack_exploration` packs the candidates into a budget.

    `within` narrows the scope to those document ids (the hybrid's LongRAG units); it never widens the ACL's.
    """
    check_question(question)
    policy, counter, config = explorer.policy, explorer.counter, explorer.config
    stages = _Stages()
    with stages("scope"):
        store, built = STORES.get(catalog)
        doc_mask = store.readable(caller)
        if within is not None:
            doc_mask &= np.fromiter((k[0] in within for k in store.keys), dtype=bool, count=len(store.keys))
        sent_mask = doc_mask[store.sent_doc]
    trace = {"method": "elite", "policy": policy.name, "question": question,
             "scope": {"documents": int(doc_mask.sum()), "sentences": int(sent_mask.sum()),
                       "store": "built" if built else "cached", "store_build_seconds": round(store.build_seconds, 3)},
             "seconds": stages.seconds, "llm_calls": policy.calls}
    with stages("plan"):
        plan = policy.plan(question)
    if plan.count is not None:
        with stages("count"):
            found = count_occurrences(store, doc_mask, plan.count.forms)
            trace |= {"branch": "count", "direct_answer": direct_answer(store, plan.count, found), "rounds": []}
            candidates = _occurrence_items(store, found, counter)
        return Exploration(candidates, _finish(trace))

    trace |= {"branch": "explore", "direct_answer": None, "rounds": []}
    terms = terms_from([question], "question", 1, 1.0, set())
    terms += terms_from(plan.terms, "generated", 1, 1.0, {t.stem for t in terms})
    question_weights = term_weights(store, sent_mask, [t for t in terms if t.kind == "question"], config.idf)
    found_chunks: list[Chunk] = []
    scored: dict[tuple, object] = {}
    irrelevant: set[tuple] = set()
    for round_ in range(1, config.max_rounds + 1):
        with stages("collect"):
            weights = term_weights(store, sent_mask, terms, config.idf)
            scores = score_sentences(store, sent_mask, weights, config.title_weight)
            hits = top_k(scores, config.top_k)
            chunks = expand(store, hits, scores, config.neighbours)
        found_chunks += chunks
        texts = [_chunk_text(store, c) for c in chunks]
        with stages("judge"):
            together, focus = coverage(store, question_weights, chunks)
        # Importance matters to a judge that reads it (every shown chunk), or else only as the last signal of the
        # stopping rule: then chunks are scored in rank order until one reaches the threshold.
        shown_to_judge = policy.reads_importance and config.judge_sees_importance
        if shown_to_judge or (together >= config.min_coverage and focus >= config.min_focus):
            with stages("importance"):
                scored |= _importance(question, chunks, texts, scored, explorer,
                                      None if shown_to_judge else config.min_importance)
        imps = [getattr(scored.get(_key(c)), "score", None) for c in chunks]
        with stages("judge"):
            known = {t.stem for t in terms}
            breadth, depth = expansion_candidates(store, sent_mask, chunks, known, config.expansion_terms)
            shown = min(config.judge_chunks, len(chunks))
            verdict = policy.judge(Evidence(question, texts[:shown], imps[:shown], breadth, depth))
            sufficient, rule = decide(verdict, together, focus, max((i for i in imps if i is not None), default=0.0),
                                      config)
            irrelevant |= {_key(chunks[i]) for i in verdict.irrelevant}
        new: list[Term] = []
        if not sufficient and round_ < config.max_rounds:
            for kind, proposed, weight in (("breadth", verdict.breadth, config.breadth_weight),
                                           ("depth", verdict.depth, config.depth_weight)):
                new += terms_from(proposed, kind, round_ + 1, weight, known | {t.stem for t in new}
                                  )[: config.expansion_terms]
        trace["rounds"].append(_round_trace(store, _Round(round_, terms, hits, scores, chunks, together, focus,
                                                          verdict, sufficient, rule), scored))
        if sufficient or not new:
            trace["stopped"] = "sufficient" if sufficient else (
                "iteration cap" if round_ == config.max_rounds else "no new terms")
            break
        terms += new
    with stages("organise"):
        candidates, organised = organise(store, sent_mask, terms, found_chunks, irrelevant, counter, config)
    trace["organise"] = organised
    return Exploration(candidates, _finish(trace))


def _importance(question: str, chunks: list[Chunk], texts: list[str], scored: dict, explorer: Explorer,
                enough: float | None) -> dict:
    """Importance of the round's best chunks not scored yet, in one batch, or one by one until a score reaches
    `enough`. Each chunk's noise is seeded by the chunk itself, so its score never depends on what was scored."""
    config, encoder = explorer.config, explorer.encoder
    todo = [i for i, c in enumerate(chunks[: config.importance_chunks]) if _key(c) not in scored]
    if not todo or not config.noise_samples or encoder is None:
        return {}
    if enough is not None and any(scored[_key(c)].score >= enough for c in chunks if _key(c) in scored):
        return {}
    out = {}
    for batch in ([todo] if enough is None else [[i] for i in todo]):
        rngs = [np.random.default_rng([config.seed, *_key(chunks[i])]) for i in batch]
        fresh = importance(question, [texts[i] for i in batch], explorer.policy.answer, encoder, config.noise_samples,
                           rngs)
        out |= {_key(chunks[i]): imp for i, imp in zip(batch, fresh)}
        if enough is not None and any(imp.score >= enough for imp in fresh):
            break
    return out


def decide(verdict: Verdict, together: float, focus: float, best_importance: float,
           config: EliteConfig) -> tuple[bool, str]:
    """Sufficient only if the measurable signals agree; an LLM's "yes" alone never ends the search.

    Signals: the question's words (idf-weighted) appear in the chunks together (coverage) and mostly in one
    chunk (focus), and at least one chunk's answer depends on its exact words (importance).
    """
    signals = bool(together >= config.min_coverage and focus >= config.min_focus
               and best_importance >= config.min_importance)
    rule = (f"coverage {together:.2f}≥{config.min_coverage} and focus {focus:.2f}≥{config.min_focus} and "
            f"importance {best_importance:.2f}≥{config.min_importance}: {'met' if signals else 'not met'}")
    if verdict.sufficient is None:
        return signals, rule
    return bool(verdict.sufficient and signals), f"LLM said {'yes' if verdict.sufficient else 'no'}; {rule}"


def organise(store: SentenceStore, sent_mask: np.ndarray, terms: list[Term], chunks: list[Chunk],
             irrelevant: set[tuple], counter: TokenCounter, config: EliteConfig) -> tuple[list[ContextItem], dict]:
    """Merge chunks found in any round, score them with every term, prune the irrelevant, best first."""
    scores = score_sentences(store, sent_mask, term_weights(store, sent_mask, terms, config.idf), config.title_weight)
    merged = _merge(chunks)
    ranked = sorted(((float(scores[c.first:c.last + 1].max()), c) for c in merged), key=lambda x: (-x[0], x[1].first))
    floor = max(config.prune_ratio * (ranked[0][0] if ranked else 0.0), 1e-9)
    relevant = [(s, c) for s, c in ranked if s >= floor]
    kept = [(s, c) for s, c in relevant if not any(_overlaps(c, k) for k in irrelevant)]
    texts = [render_header(store.titles[c.doc], *store.keys[c.doc]) + _chunk_text(store, c) for _, c in kept]
    items = [ContextItem(doc_id=store.keys[c.doc][0], doc_version=store.keys[c.doc][1], title=store.titles[c.doc],
                         text=t, tokens=int(n), ranges=((int(store.starts[c.first]), int(store.ends[c.last])),),
                         score=round(s, 4), matched=store.sentence_text(c.first + int(np.argmax(
                             scores[c.first:c.last + 1]))))
             for (s, c), t, n in zip(kept, texts, counter.count(texts))]
    return items, {"chunks": len(merged), "kept": len(kept), "pruned_low_score": len(ranked) - len(relevant),
                   "pruned_by_judge": len(relevant) - len(kept)}


def _merge(chunks: list[Chunk]) -> list[Chunk]:
    """Chunks from different rounds that overlap or touch become one (hits united)."""
    out: list[Chunk] = []
    for c in sorted(chunks, key=lambda c: (c.doc, c.first)):
        if out and out[-1].doc == c.doc and c.first <= out[-1].last + 1:
            p = out[-1]
            out[-1] = Chunk(p.doc, p.first, max(p.last, c.last), tuple(sorted(set(p.hits + c.hits))),
                            max(p.score, c.score))
        else:
            out.append(c)
    return out


def _overlaps(c: Chunk, key: tuple) -> bool:
    return c.doc == key[0] and c.first <= key[2] and key[1] <= c.last


def _key(c: Chunk) -> tuple:
    return (c.doc, c.first, c.last)


def _chunk_text(store: SentenceStore, c: Chunk) -> str:
    return store.texts[c.doc][store.starts[c.first]:store.ends[c.last]]


def _occurrence_items(store: SentenceStore, found, counter: TokenCounter) -> list[ContextItem]:
    """The sentences holding the counted occurrences, most occurrences first, each with its header."""
    per_sentence: dict[int, int] = {}
    for o in found:
        lo, hi = store.doc_ptr[o.doc], store.doc_ptr[o.doc + 1]
        s = lo + max(0, int(np.searchsorted(store.starts[lo:hi], o.start, side="right")) - 1)
        per_sentence[int(s)] = per_sentence.get(int(s), 0) + 1
    ranked = sorted(per_sentence.items(), key=lambda kv: (-kv[1], kv[0]))
    texts = [render_header(store.titles[store.sent_doc[s]], *store.keys[store.sent_doc[s]]) + store.sentence_text(s)
             for s, _ in ranked]
    return [ContextItem(store.keys[store.sent_doc[s]][0], store.keys[store.sent_doc[s]][1],
                        store.titles[store.sent_doc[s]], t, int(n), ((int(store.starts[s]), int(store.ends[s])),),
                        float(k), None, store.sentence_text(s))
            for (s, k), t, n in zip(ranked, texts, counter.count(texts))]


def _round_trace(store: SentenceStore, r: _Round, scored: dict) -> dict:
    def where(doc: int) -> dict:
        return {"doc_id": store.keys[doc][0], "version": store.keys[doc][1]}

    return {
        "round": r.number,
        "terms": [{"term": t.stem, "kind": t.kind, "weight": t.weight, "new": t.round == r.number} for t in r.terms],
        "hits": [where(int(store.sent_doc[s])) | {"start": int(store.starts[s]), "end": int(store.ends[s]),
                                                   "score": round(float(r.scores[s]), 4),
                                                   "text": store.sentence_text(int(s))[:160]} for s in r.hits],
        "chunks": [where(c.doc) | {"start": int(store.starts[c.first]), "end": int(store.ends[c.last]),
                                   "score": round(c.score, 4), "hits": len(c.hits)}
                   | _importance_trace(scored.get(_key(c))) for c in r.chunks],
        "coverage": round(r.together, 4), "focus": round(r.focus, 4),
        "judge": {"llm": r.verdict.sufficient, "irrelevant": sorted(r.verdict.irrelevant), "rule": r.rule,
                  "sufficient": r.sufficient, "proposed_breadth": r.verdict.breadth,
                  "proposed_depth": r.verdict.depth},
    }


def _importance_trace(imp) -> dict:
    if imp is None:
        return {"importance": None}
    return {"importance": imp.score, "noise_levels": list(imp.levels), "answers": [a[:120] for a in imp.answers]}


def _finish(trace: dict) -> dict:
    calls = trace["llm_calls"]
    trace["llm_totals"] = {"calls": len(calls), "input_tokens": sum(c["input_tokens"] for c in calls),
                           "output_tokens": sum(c["output_tokens"] for c in calls),
                           "fallbacks": sum(1 for c in calls if "fallback" in c)}
    return trace
