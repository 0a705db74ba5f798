"""Who makes ELITE's decisions: an LLM (any ChatModel, JSON answers) or the deterministic offline policy.

Each LLM step falls back to the offline rule when the model fails or answers unusable JSON; the trace's call
log records both the tokens spent and every fallback.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rag.answer.llm import ChatModel, LLMError, parse_json
from rag.elite.counting import CountRequest, detect_count, forms_of
from rag.text.analysis import content_terms, sentences

UNKNOWN = "unknown"


@dataclass
class Plan:
    """Step 2 and 3: a counting request (and nothing else), or the terms to search for."""

    count: CountRequest | None
    terms: list[str]


@dataclass
class Evidence:
    """What the judge sees: the chunks with their importance, and the offline expansion candidates."""

    question: str
    passages: list[str]
    importance: list[float | None]
    breadth: list[str]
    depth: list[str]


@dataclass
class Verdict:
    sufficient: bool | None          # None: this policy has no opinion (offline); the rule decides alone
    irrelevant: set[int]             # 0-based indexes into Evidence.passages
    breadth: list[str]
    depth: list[str]


class OfflinePolicy:
    """Deterministic rules: question words as terms, extractive answers, expansion terms from the store."""

    name = "offline"
    reads_importance = False        # its judge has no opinion; importance only enters the stopping rule

    def __init__(self):
        self.calls: list[dict] = []

    def plan(self, question: str) -> Plan:
        return Plan(detect_count(question), [question])

    def answer(self, question: str, passage: str) -> str:
        """The passage's sentence sharing most question words ("unknown" when it shares none)."""
        wanted = set(content_terms(question))
        best, best_n = UNKNOWN, 0
        for sentence in sentences(passage):
            n = len(wanted.intersection(content_terms(sentence)))
            if n > best_n:
                best, best_n = sentence, n
        return best

    def judge(self, evidence: Evidence) -> Verdict:
        return Verdict(None, set(), evidence.breadth, evidence.depth)


@dataclass
class LLMPolicy:
    """The same steps asked of a chat model; every call's tokens and time go to `calls`."""

    model: ChatModel
    judge_chars: int = 700
    reads_importance = True         # the judge is shown every chunk's importance
    calls: list[dict] = field(default_factory=list)
    offline: OfflinePolicy = field(default_factory=OfflinePolicy)

    @property
    def name(self) -> str:
        return f"llm:{getattr(self.model, 'name', 'model')}"

    def plan(self, question: str) -> Plan:
        reply = self._json("plan", [
            {"role": "system", "content": "You plan a keyword search over company documents. "
                                          "Reply with one JSON object and nothing else."},
            {"role": "user", "content": (
                f"Question: {question}\n\n"
                "If the question asks how many times a word or phrase occurs in the documents, reply "
                '{"count": true, "phrase": "<the word or phrase>", "forms": ["<each form: singular, plural, '
                'tenses>"]}.\nOtherwise reply {"count": false, "terms": ["<5 to 10 words or short phrases to '
                'search for: names and key words of the question and concepts needed to answer it>"]}.')}],
            max_tokens=160)
        if reply is None:
            return self.offline.plan(question)
        if reply.get("count") is True and _text(reply.get("phrase")):
            phrase = _text(reply["phrase"])
            return Plan(CountRequest(phrase, forms_of(phrase, _strings(reply.get("forms")))), [])
        terms = _strings(reply.get("terms"))
        return Plan(None, terms + [question])   # the question's own words always stay in the search

    def answer(self, question: str, passage: str) -> str:
        completion = self._call("answer", [
            {"role": "system", "content": "Answer from the passage only, in a few words. If the passage does "
                                          f"not contain the answer, reply exactly: {UNKNOWN}"},
            {"role": "user", "content": f"Passage:\n{passage}\n\nQuestion: {question}"}], max_tokens=48)
        return completion.strip() if completion is not None else self.offline.answer(question, passage)

    def judge(self, evidence: Evidence) -> Verdict:
        shown = "\n\n".join(
            f"[{i + 1}] (importance {'-' if imp is None else f'{imp:.2f}'})\n{p[: self.judge_chars]}"
            for i, (p, imp) in enumerate(zip(evidence.passages, evidence.importance)))
        reply = self._json("judge", [
            {"role": "system", "content": "You check whether passages are enough to answer a question. "
                                          "Reply with one JSON object and nothing else."},
            {"role": "user", "content": (
                f"Question: {evidence.question}\n\nPassages (importance: how much an answer depends on the "
                f"passage, 0 to 1):\n{shown}\n\nReply "
                '{"sufficient": true or false, "irrelevant": [<numbers of passages unrelated to the question>], '
                '"breadth": [<new search words related to the question>], '
                '"depth": [<names or entities in the passages worth searching for next>]}.')}],
            max_tokens=200)
        if reply is None:
            return self.offline.judge(evidence)
        sufficient = reply.get("sufficient")
        irrelevant = {int(i) - 1 for i in reply.get("irrelevant") or [] if str(i).isdigit()}
        return Verdict(sufficient if isinstance(sufficient, bool) else None,
                       {i for i in irrelevant if 0 <= i < len(evidence.passages)},
                       _strings(reply.get("breadth")), _strings(reply.get("depth")))

    def _json(self, step: str, messages: list[dict], max_tokens: int) -> dict | None:
        text = self._call(step, messages, max_tokens, json_object=True)
        reply = parse_json(text) if text is not None else {}
        if not reply and text is not None:
            self.calls[-1]["fallback"] = "no JSON object in the reply"
        return reply or None

    def _call(self, step: str, messages: list[dict], max_tokens: int, json_object: bool = False) -> str | None:
        try:
            c = self.model.complete(messages, max_tokens=max_tokens, json_object=json_object)
        except LLMError as err:
            self.calls.append({"step": step, "input_tokens": 0, "output_tokens": 0, "seconds": 0.0,
                               "fallback": str(err)})
            return None
        self.calls.append({"step": step, "input_tokens": c.input_tokens, "output_tokens": c.output_tokens,
                           "seconds": round(c.seconds, 4)})
        return c.text


def _text(value) -> str:
    return value.strip() if isinstance(value, str) else ""


def _strings(value) -> list[str]:
    """A list of non-empty strings from whatever a small model put there (a list, one string, numbers)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    return [s for s in (str(v).strip() for v in value if isinstance(v, (str, int, float))) if s]
