"""The evaluation loop: every question × method × budget, each context recounted against its budget."""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from tqdm import tqdm

from rag.access import Caller
from rag.benchmarks import Question, complete, evidence_recall
from rag.context import RetrievalResult
from rag.evaluation.metrics import exact_match, f1, sentence_recall
from rag.evaluation.workspace import BENCH_ACL, Prepared
from rag.llm import ChatModel
from rag.reader import answer
from rag.tokens import TokenCounter

METHODS = ("longrag", "elite", "shortchunk")
ELITE_POLICIES = ("offline", "reader")


class BudgetExceeded(AssertionError):
    """A method handed the reader more tokens than the budget: the comparison would be unfair, so the run stops."""


class MethodUnavailable(RuntimeError):
    """A requested method cannot run here (its module failed to import)."""


@dataclass(frozen=True)
class EvalConfig:
    """What to run; validated on creation so a bad flag fails before any work."""

    methods: tuple[str, ...] = ("longrag", "elite")
    budgets: tuple[int, ...] = (1000, 2000, 4000, 8000)
    limit: int | None = None            # first N questions of the benchmark
    answer_sample: int | None = None    # questions the reader answers (a fixed hash-ordered sample); all when None
    elite_policy: str = "offline"       # "reader": the reader's LLM also drives ELITE's exploration

    def __post_init__(self):
        unknown = set(self.methods) - set(METHODS)
        if unknown or not self.methods:
            raise ValueError(f"methods must be among {', '.join(METHODS)}; got {', '.join(self.methods) or 'none'}")
        if not self.budgets or min(self.budgets) <= 0:
            raise ValueError("budgets must be positive token counts")
        if self.elite_policy not in ELITE_POLICIES:
            raise ValueError(f"elite_policy must be one of {', '.join(ELITE_POLICIES)}")


@dataclass
class Row:
    """One question × method × budget: what the reader got, what it said, what it cost (a results.jsonl line)."""

    qid: str
    method: str
    budget: int
    tokens: int                      # handed to the reader, recounted with the budget tokenizer
    retrieved_doc_ids: list[str]
    evidence_recall: float           # share of gold documents with text in the context
    sentence_recall: float | None    # share of supporting-fact sentences in the context (None: no such facts)
    complete: bool                   # every gold document present
    answered: bool                   # in the reader's sample
    short_answer: str | None
    exact_match: float | None
    f1: float | None
    citations_valid: bool | None
    citation_locatable: float | None
    retrieve_s: float
    generate_s: float | None
    llm_calls: int                   # retrieval (ELITE's policy) + reader
    input_tokens: int
    output_tokens: int

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Evaluation:
    """Every row of one benchmark's run, and what the summary needs to say how they were produced."""

    benchmark: str
    config: EvalConfig
    reader: str
    elite_policy: str | None
    questions: int
    answered: int
    rows: list[Row]
    warmup_seconds: dict[str, float] = field(default_factory=dict)  # in-memory structures built before query 1
    seconds: float = 0.0


def check_budget(result: RetrievalResult, budget: int, counter: TokenCounter) -> int:
    """Tokens the reader gets, recounted item by item; raises BudgetExceeded when over the budget."""
    counted = int(counter.count([i.text for i in result.items]).sum())
    if max(counted, result.tokens) > budget:
        raise BudgetExceeded(f"{result.method} handed the reader {max(counted, result.tokens)} tokens "
                             f"at budget {budget}")
    return counted


def answer_sample(questions: list[Question], n: int | None) -> set[str]:
    """qids the reader answers: all, or n chosen by a hash of the qid (stable, and not biased by file order)."""
    if n is None:
        return {q.qid for q in questions}
    ordered = sorted(questions, key=lambda q: hashlib.sha256(q.qid.encode()).hexdigest())
    return {q.qid for q in ordered[:n]}


class SentenceVectors:
    """The extractive reader embeds the same context sentences at every budget and method: embed each once per
    question, but charge every use its share of the embedding time, so generation times do not depend on order."""

    def __init__(self, embedder):
        self._embedder = embedder
        self._vectors: dict[str, tuple[np.ndarray, float]] = {}
        self._saved = 0.0

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        self._saved += sum(self._vectors[t][1] for t in set(texts) - set(missing))
        if missing:
            start = time.perf_counter()
            vectors = self._embedder.encode(missing)
            share = (time.perf_counter() - start) / len(missing)
            self._vectors.update((t, (v, share)) for t, v in zip(missing, vectors))
        return np.stack([self._vectors[t][0] for t in texts])

    def saved_seconds(self) -> float:
        """Embedding time the cache saved since the last call: what an uncached reader would have spent more."""
        saved, self._saved = self._saved, 0.0
        return saved

    def clear(self) -> None:
        self._vectors.clear()
        self._saved = 0.0


class Retrievers:
    """Each method's contexts for one question at every budget, with the retrieval seconds of each."""

    def __init__(self, prepared: Prepared, embedder, counter: TokenCounter, policy_model: ChatModel | None):
        self.prepared, self.embedder, self.counter, self.policy_model = prepared, embedder, counter, policy_model
        self.caller = Caller(frozenset({BENCH_ACL}))

    def run(self, method: str, question: str, budgets: tuple[int, ...]) -> list[tuple[RetrievalResult, float]]:
        if method == "elite":
            return self._elite(question, budgets)
        out = []
        for budget in budgets:
            start = time.perf_counter()
            result = self.prepared.reader.retrieve(method, self.caller, question, budget)
            out.append((result, time.perf_counter() - start))
        return out

    def _elite(self, question: str, budgets: tuple[int, ...]) -> list[tuple[RetrievalResult, float]]:
        """Explore once (budget-independent), pack per budget; each budget's time is exploration plus its packing."""
        from rag.elite import elite_explore, pack_exploration

        start = time.perf_counter()
        found = elite_explore(self.prepared.reader.snapshot().catalog, self.caller, question, model=self.policy_model,
                              embedder=self.embedder, counter=self.counter)
        explored = time.perf_counter() - start
        out = []
        for budget in budgets:
            start = time.perf_counter()
            result = pack_exploration(found, budget)
            out.append((result, explored + time.perf_counter() - start))
        return out

    def warm_up(self, methods: tuple[str, ...]) -> dict[str, float]:
        """Build the per-process structures a first query would otherwise pay for, and time them."""
        seconds = {}
        if "longrag" in methods:
            start = time.perf_counter()
            self.prepared.reader.snapshot().lexical  # noqa: B018 - built on first use
            seconds["longrag_lexical_index"] = time.perf_counter() - start
        if "elite" in methods:
            from rag.elite import STORES

            store, _ = STORES.get(self.prepared.reader.snapshot().catalog)
            seconds["elite_sentence_store"] = store.build_seconds
        return seconds


def ensure_available(methods: tuple[str, ...]) -> None:
    """ELITE lives in its own package; say so plainly if it cannot be imported."""
    if "elite" in methods:
        try:
            import rag.elite  # noqa: F401
        except ImportError as err:
            raise MethodUnavailable(f"method elite is unavailable: rag.elite cannot be imported ({err})") from err


def evaluate(prepared: Prepared, questions: list[Question], config: EvalConfig, embedder, counter: TokenCounter,
             model: ChatModel | None) -> Evaluation:
    """Run every question through every method at every budget; `model=None` is the extractive reader."""
    ensure_available(config.methods)
    start = time.perf_counter()
    policy_model = model if config.elite_policy == "reader" else None
    retrievers = Retrievers(prepared, embedder, counter, policy_model)
    warmup = retrievers.warm_up(config.methods)
    sample = answer_sample(questions, config.answer_sample)
    vectors = SentenceVectors(embedder)
    rows: list[Row] = []
    policy = None
    for q in tqdm(questions, desc=f"evaluating {prepared.benchmark}", unit="question", disable=None):
        vectors.clear()
        for method in config.methods:
            for result, seconds in retrievers.run(method, q.question, config.budgets):
                tokens = check_budget(result, result.budget, counter)  # before the reader sees a token
                policy = result.trace.get("policy", policy)
                reply = answer(q.question, result, model, vectors) if q.qid in sample else None
                generate = reply.seconds + vectors.saved_seconds() if reply else None
                rows.append(_row(q, result, tokens, seconds, reply, generate))
    return Evaluation(prepared.benchmark, config, _reader_label(model), policy if "elite" in config.methods else None,
                      len(questions), len(sample), rows, warmup, time.perf_counter() - start)


def _reader_label(model: ChatModel | None) -> str:
    if model is None:
        return "extractive"
    return f"{getattr(model, 'kind', 'endpoint')}:{model.name}"


def _row(q: Question, result: RetrievalResult, tokens: int, seconds: float, reply, generate_s: float | None) -> Row:
    ids = list(dict.fromkeys(i.doc_id for i in result.items))
    llm = result.trace.get("llm_totals", {})
    answers = (q.answer, *q.aliases)
    return Row(
        qid=q.qid, method=result.method, budget=result.budget, tokens=tokens, retrieved_doc_ids=ids,
        evidence_recall=evidence_recall(set(ids), q.gold_doc_ids),
        sentence_recall=sentence_recall(result.items, q.supporting_sentences),
        complete=complete(set(ids), q.gold_doc_ids), answered=reply is not None,
        short_answer=reply.short_answer if reply else None,
        exact_match=exact_match(reply.short_answer, answers) if reply else None,
        f1=f1(reply.short_answer, answers) if reply else None,
        citations_valid=reply.citations_valid if reply else None,
        citation_locatable=reply.citation_locatable if reply else None,
        retrieve_s=round(seconds, 6), generate_s=round(generate_s, 6) if reply else None,
        llm_calls=llm.get("calls", 0) + (reply.llm_calls if reply else 0),
        input_tokens=llm.get("input_tokens", 0) + (reply.input_tokens if reply else 0),
        output_tokens=llm.get("output_tokens", 0) + (reply.output_tokens if reply else 0))
