"""A later hop's queries: what the seed documents of the hop before add to the question (the bridge entities)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rag.retrieval.context import Candidate, ContextItem
from rag.retrieval.dense import Hit
from rag.retrieval.read_state import Snapshot
from rag.text.analysis import MAX_QUESTION_CHARS, content_terms, is_stop, names, sentences, term, words
from rag.text.bounded_cache import bytes_bounded

Entry = Candidate | ContextItem
# Capitalised like names, but a date in a paragraph is almost never the entity its next hop is about.
CALENDAR = frozenset("january february march april may june july august september october november december "
                     "monday tuesday wednesday thursday friday saturday sunday".split())


@dataclass(frozen=True)
class HopRule:
    """How a later hop's queries are made (LongRAGConfig's hop settings, with the caller's title look-up)."""

    mode: str                                      # "residual", "names", "novel" or "sentence"
    names: int                                     # names a "residual"/"names" query carries
    seeds: int                                     # queries per hop, one per seed
    is_title: Callable[[str], bool] | None = None  # set: dates dropped, titled names first (titles_first)
    only_titles: bool = False                      # and the other names only when none is a title


def hop_queries(snap: Snapshot, embedder, question: str, source: list[Entry], seeds: list[str],
                own: dict[tuple[str, str, int], Hit], rule: HopRule):
    """A hop's (query, vector, seeds placed so far) triples, one per seed, embedded in one batch. Every query reads
    the source list and, in "novel" and "sentence", the seed's sub-chunk matched by the hop that made that list."""
    queries = []
    for _ in range(rule.seeds):
        query = next_query(snap, question, source, seeds, own, rule)
        if query is None:
            break
        queries.append((query, set(seeds)))  # a branch hides the seeds placed up to its own, not later ones
    texts = list(dict.fromkeys(q for q, _ in queries))  # seeds copying one text make one query, embedded once
    vectors: list[np.ndarray] = embedder.encode_queries(texts) if len(texts) > 1 else [embedder.encode_query(q)
                                                                                          for q in texts]
    embedded = dict(zip(texts, vectors))
    for query, placed in queries:
        yield query, embedded[query], placed


@dataclass(frozen=True)
class ReadableTitle:
    """Whether a name is exactly the title of a current document these groups may read (others stay unseen)."""

    snap: Snapshot
    groups: frozenset[str]

    def __call__(self, name: str) -> bool:
        titles = self.snap.current.titles
        return name in titles and bool(self.snap.readable_ids(titles[name], self.groups))

    def among(self, names: list[str]) -> set[str]:
        """The names that are such titles: one search for all, then the readable check for the few found."""
        found = self.snap.current.titles.keys_table.codes(names)
        return {n for n, code in zip(names, found.tolist()) if code >= 0 and self(n)}


def readable_title(snap: Snapshot, groups: frozenset[str]) -> ReadableTitle:
    return ReadableTitle(snap, groups)


def no_title(name: str) -> bool:
    """No name counts as a title: titles_first then only drops the dates."""
    return False


def next_query(snap: Snapshot, question: str, source: list[Entry], seeds: list[str],
               own: dict[tuple[str, str, int], Hit], rule: HopRule) -> str | None:
    """The next query from the source list's strongest document not yet a seed, or None when it offers none.

    Multi-hop dense retrieval's idea: the bridge entity is named in the first hop's evidence, not in the
    question, so the next query carries that evidence. "residual" (the default) asks what the seed leaves
    open plus the names it adds (bridge_query); "names" keeps the whole question; "novel" adds the matched
    sub-chunk's content words the question lacks, "sentence" its sentence sharing most of the question's
    terms, each after the seed's title.
    """
    seed = next((i for i in source if i.unit_id is not None and i.doc_id not in seeds), None)
    if seed is None:
        return None
    seeds.append(seed.doc_id)
    _, text = snap.texts([(seed.doc_id, seed.doc_version)])[(seed.doc_id, seed.doc_version)]
    member = text[seed.ranges[0][0]:seed.ranges[0][1]]
    mode = rule.mode
    if mode in ("names", "residual"):
        return bridge_query(question, seed.title, member, mode == "residual", rule.names, rule.is_title,
                            rule.only_titles)
    hit = own.get((seed.unit_id, seed.doc_id, seed.part))
    evidence = text[hit.start:hit.end] if hit else member
    asked = set(content_terms(question))
    if mode == "sentence":
        evidence = max(sentences(evidence), key=lambda s: len(asked & set(content_terms(s))))
    elif mode == "novel":
        evidence = " ".join(w for w in dict.fromkeys(words(evidence)) if not is_stop(w) and term(w) not in asked)
    return f"{question}\n{seed.title}\n{evidence}"[:MAX_QUESTION_CHARS]  # a long question keeps its own words


def bridge_query(question: str, title: str, text: str, residual: bool, limit: int,
                 is_title: Callable[[str], bool] | None = None, only: bool = False) -> str | None:
    """The question (or what the seed leaves unanswered) plus the names the seed adds, its best sentences first.

    A sentence is better the more of the question beyond the seed's title it shares: the title is what matched,
    the rest of the question is what the bridge sentence answers. With `is_title`, dates are dropped and the
    names that are documents' titles go first (see titles_first); with `only` too, the others only when no name
    is a title.
    """
    asked, titled = set(content_terms(question)), set(content_terms(title))
    known, beyond = asked | titled, asked - titled
    facts = _sentence_facts(text)
    ordered = sorted(facts.sentences, key=lambda f: -len(beyond & f[0]))
    bridges = list(dict.fromkeys(n for _, found in ordered for n, terms in found if not terms <= known))
    if is_title is not None:
        bridges = titles_first(bridges, is_title, only)
    if not bridges:
        return None
    seen = facts.terms | titled
    head = " ".join(w for w in words(question) if not is_stop(w) and term(w) not in seen) if residual else question
    return f"{head}\n{' '.join(bridges[:limit])}"[:MAX_QUESTION_CHARS]


def titles_first(bridges: list[str], is_title: Callable[[str], bool], only: bool = False) -> list[str]:
    """The names without dates, those that are a document's title first (each group in its order): a name with a
    document of its own is what the next hop can be about; MuSiQue's bridges are often countries, people, films.
    With `only`, the titles alone when there are any."""
    kept = [n for n in bridges if not set(words(n)) <= CALENDAR]
    flags = [is_title(n) for n in kept]
    titles = [n for n, f in zip(kept, flags) if f]
    return titles if only and titles else titles + [n for n, f in zip(kept, flags) if not f]


@dataclass(frozen=True)
class SentenceFacts:
    """What bridge_query reads from a seed's text, whatever the question: per sentence its content terms and its
    names with theirs, and the text's content terms."""

    sentences: list[tuple[frozenset[str], list[tuple[str, frozenset[str]]]]]
    terms: frozenset[str]


# An entry holds 15–19 bytes per character of its text, and its key keeps the text alive, old versions' too: only a
# bound in bytes caps a long-lived server whatever its documents' lengths (docs/serving-rules.md).
FACTS_CACHE_BYTES = 32 << 20


@bytes_bounded(FACTS_CACHE_BYTES)
def _sentence_facts(text: str) -> SentenceFacts:
    """A member text's facts, kept for the next question seeded by it (sentence splitting was a third of a hop)."""
    return SentenceFacts([(frozenset(content_terms(s)), [(n, frozenset(content_terms(n))) for n in names(s)])
                          for s in sentences(text)], frozenset(content_terms(text)))
