"""LongRAG's later hop with a query the reader's LLM writes: after hop one it reads the question and the best
sentences of the top documents and names what to search for next, the bridge entity filled in."""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from rag.retrieval.context import Candidate, ContextItem
from rag.retrieval.read_state import Snapshot
from rag.text.analysis import MAX_QUESTION_CHARS, content_terms, sentences

Entry = Candidate | ContextItem

SYSTEM = "You split a multi-hop question into steps. Reply with two lines."
# One worked example: the 0.5B local model follows a pattern far better than an instruction. Asked for a search
# query or a rewritten question outright, it answered the question or copied it (tried on a few questions).
EXAMPLE = ("Question: Who is the spouse of the director of Jaws?\n"
           "Passage: Jaws (film): Jaws is a 1975 American thriller film directed by Steven Spielberg.\n"
           "Found: the director of Jaws is Steven Spielberg.\n"
           "Next question: Who is the spouse of Steven Spielberg?")


@dataclass(frozen=True)
class BridgeConfig:
    """What the LLM reads: the first `seeds` documents of hop one, `sentences` of each (the question's best)."""

    seeds: int = 2
    sentences: int = 2
    max_tokens: int = 40


def bridge_prompt(question: str, passages: list[tuple[str, str]]) -> list[dict]:
    """The chat messages asking what hop one found and what to ask next, given (title, sentences) passages."""
    listed = "\n".join(f"Passage: {title}: {text}" for title, text in passages)
    user = f"Example:\n{EXAMPLE}\n\nQuestion: {question}\n{listed}\nFound:"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def passages(snap: Snapshot, question: str, ranked, config: BridgeConfig) -> list[tuple[str, str]]:
    """The first readable documents of hop one's list, each as its title and the sentences sharing most of the
    question's terms, in text order (the list holds only members the caller may read)."""
    asked, chosen, seen = set(content_terms(question)), [], set()
    for entry in ranked:
        if len(chosen) == config.seeds:
            break
        if entry.unit_id is None or entry.doc_id in seen:
            continue
        seen.add(entry.doc_id)
        _, text = snap.texts([(entry.doc_id, entry.doc_version)])[(entry.doc_id, entry.doc_version)]
        said = sentences(text[entry.ranges[0][0]:entry.ranges[0][1]])
        best = sorted(range(len(said)), key=lambda i: (-len(asked & set(content_terms(said[i]))), i))
        chosen.append((entry.title, " ".join(said[i] for i in sorted(best[: config.sentences]))))
    return chosen


def cleaned(reply: str) -> str:
    """The reply's first two non-empty lines (what was found, the next question) without labels or quotes."""
    lines = [x.strip() for x in reply.splitlines() if x.strip()][:2]
    for label in ("Found:", "Next question:"):
        lines = [x[len(label):].strip() if x.lower().startswith(label.lower()) else x for x in lines]
    return " ".join(x.strip("\"'` ") for x in lines if x.strip("\"'` "))[:MAX_QUESTION_CHARS]


class PromptCache:
    """Replies by (model, prompt), bounded: a question asked again (another budget, a retry) costs no second call;
    the model runs at temperature 0, so the reply is the one it would give again."""

    def __init__(self, size: int = 4096):
        self._replies: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._size, self._lock = size, threading.Lock()

    def reply(self, model, messages: list[dict], max_tokens: int) -> str:
        key = (getattr(model, "name", "model"), repr(messages))
        with self._lock:
            if key in self._replies:
                self._replies.move_to_end(key)
                return self._replies[key]
        text = model.complete(messages, max_tokens=max_tokens).text
        with self._lock:
            self._replies[key] = text
            if len(self._replies) > self._size:
                self._replies.popitem(last=False)
        return text


CACHE = PromptCache()


def copied_example(reply: str) -> bool:
    """Whether the reply repeats the worked example's names: the 0.5B model did so for 4 of 10 MuSiQue questions."""
    return any(name in reply for name in EXAMPLE_NAMES)


EXAMPLE_NAMES = ("Spielberg", "Jaws")


def llm_bridges(model, config: BridgeConfig = BridgeConfig()):
    """The bridge hook for longrag_candidates: hop one's list → the question followed by what the LLM says hop
    one found and asks next (no query when it writes nothing of its own)."""
    def bridges(snap: Snapshot, question: str, ranked) -> list[str]:
        found = passages(snap, question, ranked, config)
        if not found:
            return []
        reply = cleaned(CACHE.reply(model, bridge_prompt(question, found), config.max_tokens))
        return [f"{question}\n{reply}"[:MAX_QUESTION_CHARS]] if reply and not copied_example(reply) else []
    return bridges
