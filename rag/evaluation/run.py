"""The evaluation loop: every question × method × budget, each context recounted against its budget."""
from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from tqdm import tqdm

from rag.answer.llm import ChatModel
from rag.answer.reader import Answer, answer
from rag.evaluation.expect import expectation_met, forbidden_texts
from rag.evaluation.memo import CountMemo, QueryMemo
from rag.evaluation.metrics import exact_match, f1, normalize_answer, sentence_recall
from rag.evaluation.prepared import BENCH_ACL, Prepared
from rag.evaluation.questions import EvalQuestion, asker_label, caller_for
from rag.models.tokens import TokenCounter
from rag.query.methods import METHODS as REGISTRY
from rag.retrieval.callers import Caller
from rag.retrieval.context import RetrievalResult
from rag.retrieval.request import Tools
from rag.sources.benchmarks import complete, evidence_recall

METHODS = tuple(REGISTRY)
ELITE_POLICIES = ("offline", "reader")


class BudgetExceeded(AssertionError):
    """A method handed the reader more tokens than the budget: the comparison would be unfair, so the run stops."""


class MethodUnavailable(RuntimeError):
    """A requested method cannot run here (its module failed to import)."""


@dataclass(frozen=True)
class EvalConfig:
    """What to run; validated on creation so a bad flag fails before any work."""

    methods: tuple[str, ...] = METHODS
    budgets: tuple[int, ...] = (1000, 2000, 4000, 8000)
    limit: int | None = None            # first N questions of the set
    answer_sample: int | None = None    # questions the reader answers (stratified by type and hops, seeded); all if None
    elite_policy: str = "offline"       # "reader": the reader's LLM also drives ELITE's exploration
    answer_budgets: tuple[int, ...] | None = None  # budgets the reader answers at (all when None)
    sample_seed: int = 0

    def __post_init__(self):
        unknown = set(self.methods) - set(METHODS)
        if unknown or not self.methods:
            raise ValueError(f"methods must be among {', '.join(METHODS)}; got {', '.join(self.methods) or 'none'}")
        if not self.budgets or min(self.budgets) <= 0:
            raise ValueError("budgets must be positive token counts")
        if self.answer_budgets and not set(self.answer_budgets) <= set(self.budgets):
            raise ValueError("answer budgets must be among the budgets")
        if self.elite_policy not in ELITE_POLICIES:
            raise ValueError(f"elite_policy must be one of {', '.join(ELITE_POLICIES)}")


@dataclass
class Row:
    """One question × method × budget: what the reader got, what it said, what it cost (a results.jsonl line)."""

    qid: str
    method: str
    budget: int
    kind: str                        # question type (bridge, comparison, counting, …)
    hops: int
    asked_as: str
    expect: str
    tokens: int                      # handed to the reader, recounted with the budget tokenizer
    retrieved_doc_ids: list[str]
    evidence_recall: float | None    # share of gold documents with text in the context (None: not_found)
    sentence_recall: float | None    # share of supporting-fact sentences in the context (None: no such facts)
    complete: bool | None            # every gold document present (None: not_found)
    expectation_met: bool | None     # not_found / absent_version: nothing forbidden shown (None: plain question)
    answered: bool                   # in the reader's sample at this budget
    abstained: bool | None           # the reader's reply was withheld: nothing in the context supports it
    short_answer: str | None
    exact_match: float | None
    f1: float | None
    citations_valid: bool | None
    citation_locatable: float | None
    cited_gold: bool | None          # the reader cited a gold document
    citation_recall: float | None    # share of gold documents cited (ALCE-style, against gold documents)
    citation_precision: float | None  # share of cited documents that are gold (None: nothing cited)
    citations_attributed: float | None  # share of the answer's citations attributed after the fact, not model-given
    short_answer_supported: bool | None  # the short answer is found in, or derived from, cited text
    answer_in_gold: bool | None      # the short answer occurs in a gold document's context text
    retrieve_s: float
    generate_s: float | None
    llm_calls: int                   # retrieval (ELITE's policy) + reader
    input_tokens: int
    output_tokens: int
    long_answer: str | None = None   # what the reader said, with its citations, as a user sees it
    replies: list[str] | None = None  # the model's outputs as written, so a later citation rule can be scored on them

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Evaluation:
    """Every row of one run, and what the summary needs to say how they were produced."""

    benchmark: str
    config: EvalConfig
    reader: str
    elite_policy: str | None
    questions: int
    answered: int
    rows: list[Row]
    prepare_seconds: dict[str, float] = field(default_factory=dict)  # per-process structures, built and timed
    seconds: float = 0.0


def check_budget(result: RetrievalResult, budget: int, counter: TokenCounter) -> int:
    """Tokens the reader gets, recounted item by item; raises BudgetExceeded when over the budget."""
    counted = int(counter.count([i.text for i in result.items]).sum())
    if max(counted, result.tokens) > budget:
        raise BudgetExceeded(f"{result.method} handed the reader {max(counted, result.tokens)} tokens "
                             f"at budget {budget}")
    return counted


def answer_sample(questions: list[EvalQuestion], n: int | None, seed: int = 0) -> set[str]:
    """qids the reader answers: all, or n drawn per stratum (type × hops) in proportion, with a seeded shuffle."""
    if n is None or n >= len(questions):
        return {q.qid for q in questions}
    strata: dict[tuple, list[str]] = defaultdict(list)
    for q in sorted(questions, key=lambda q: q.qid):
        strata[q.stratum].append(q.qid)
    rng = random.Random(seed)
    for qids in strata.values():
        rng.shuffle(qids)
    # Largest remainder: each stratum gets its share of n, the leftovers go to the largest fractions.
    shares = {s: n * len(v) / len(questions) for s, v in strata.items()}
    taken = {s: int(share) for s, share in shares.items()}
    for s in sorted(shares, key=lambda s: (-(shares[s] - taken[s]), s))[: n - sum(taken.values())]:
        taken[s] += 1
    return {qid for s, qids in strata.items() for qid in qids[: taken[s]]}


class Retrievers:
    """Each method's contexts for one question at every budget (one ranking each), with the seconds of each."""

    def __init__(self, prepared: Prepared, embedder, counter: TokenCounter, policy_model: ChatModel | None,
                 elite_config=None):
        self.prepared, self.policy_model = prepared, policy_model
        self.embedder, self.counter = QueryMemo(embedder), CountMemo(counter)  # the counter memo: budget checks only
        self.tools = Tools(self.embedder, counter, elite_config)

    def next_question(self) -> None:
        self.embedder.clear()
        self.counter.clear()

    def run(self, method: str, caller: Caller, question: str,
            budgets: tuple[int, ...]) -> list[tuple[RetrievalResult, float]]:
        # The question is embedded once for all methods; each method that uses the vector is charged that time.
        embedding = self.embedder.seconds(question) if REGISTRY[method].uses_index else 0.0
        return [(result, seconds + embedding) for result, seconds in self.prepared.reader.retrieve_at_budgets(
            method, caller, question, budgets, model=self.policy_model, tools=self.tools)]

    def prepare(self, methods: tuple[str, ...]) -> dict[str, float]:
        """Build, from scratch and timed, the in-memory structures each method needs before its first query."""
        seconds = {}
        if any(REGISTRY[m].uses_lexical for m in methods):  # the BM25 channel; the others read the dense index only
            start = time.perf_counter()
            self.prepared.reader.snapshot().lexical  # noqa: B018 - built on first use
            seconds["lexical_index"] = time.perf_counter() - start
        if any(REGISTRY[m].uses_sentences for m in methods):
            from rag.elite import STORES

            STORES.clear()  # a store another evaluation built in this process would make ELITE's build look free
            store, _ = STORES.get(self.prepared.reader.snapshot().catalog)
            seconds["sentence_store"] = store.build_seconds
        return seconds


def ensure_available(methods: tuple[str, ...]) -> None:
    """ELITE lives in its own package; say so plainly if it cannot be imported."""
    if {"elite", "hybrid"} & set(methods):
        try:
            import rag.elite  # noqa: F401
        except ImportError as err:
            raise MethodUnavailable(f"methods elite and hybrid are unavailable: rag.elite cannot be imported ({err})"
                                    ) from err


@dataclass(frozen=True)
class Evaluator:
    """What an evaluation run shares, bound once: what to run, the embedder and counter, the reader's model (None:
    nothing is answered), who asks questions that do not say, and the command the report names."""

    config: EvalConfig
    embedder: object
    counter: TokenCounter
    model: ChatModel | None = None
    command: str = ""
    users: Mapping[str, Caller] = field(default_factory=dict)
    default_caller: Caller | None = None
    elite_config: object = None  # an EliteConfig overriding ELITE's settings (the benches that look for cheap ones)


def evaluate(prepared: Prepared, questions: list[EvalQuestion], ev: Evaluator) -> Evaluation:
    """Run every question through every method at every budget, as its asker."""
    config, model = ev.config, ev.model
    ensure_available(config.methods)
    default_caller = ev.default_caller or Caller(frozenset({BENCH_ACL}))
    callers = {q.qid: caller_for(q, default_caller, ev.users) for q in questions}  # a bad asker fails first
    retrievers = Retrievers(prepared, ev.embedder, ev.counter, model if config.elite_policy == "reader" else None,
                            ev.elite_config)
    prepare = retrievers.prepare(config.methods)
    start = time.perf_counter()
    sample = answer_sample(questions, config.answer_sample, config.sample_seed) if model is not None else set()
    answer_budgets = set(config.answer_budgets or config.budgets)
    rows: list[Row] = []
    policy = None
    snap = prepared.reader.snapshot()
    for q in tqdm(questions, desc=f"evaluating {prepared.benchmark}", unit="question", disable=None):
        retrievers.next_question()
        forbidden = forbidden_texts(snap, q)
        for method in config.methods:
            for result, seconds in retrievers.run(method, callers[q.qid], q.question, config.budgets):
                tokens = check_budget(result, result.budget, retrievers.counter)  # before the reader sees a token
                policy = result.trace.get("policy", policy)
                met = expectation_met(q, result, forbidden, _shown_texts(snap, result)) \
                    if q.expect != "answer" else None
                asked = q.qid in sample and result.budget in answer_budgets
                reply = answer(q.question, result, model) if asked else None
                rows.append(_row(q, result, tokens, seconds, reply, met))
    return Evaluation(prepared.benchmark, config, reader_label(model), policy if "elite" in config.methods else None,
                      len(questions), len(sample), rows, prepare, time.perf_counter() - start)


def reader_label(model: ChatModel | None) -> str:
    if model is None:
        return "none"
    return f"{getattr(model, 'kind', 'endpoint')}:{model.name}"


def _shown_texts(snap, result: RetrievalResult) -> dict[tuple[str, str], str]:
    texts = snap.texts([(i.doc_id, i.doc_version) for i in result.items])
    return {k: v[1] for k, v in texts.items()}


def _row(q: EvalQuestion, result: RetrievalResult, tokens: int, seconds: float, reply: Answer | None,
         met: bool | None) -> Row:
    ids = list(dict.fromkeys(i.doc_id for i in result.items))
    llm = result.trace.get("llm_totals", {})
    answers = (q.answer, *q.aliases)
    scored = q.expect != "not_found" and bool(q.gold_doc_ids)
    claimed = reply is not None and not reply.abstained  # an abstention makes no claim for citations to back
    return Row(
        qid=q.qid, method=result.method, budget=result.budget, kind=q.kind, hops=q.hops, asked_as=asker_label(q),
        expect=q.expect, tokens=tokens, retrieved_doc_ids=ids,
        evidence_recall=evidence_recall(set(ids), q.gold_doc_ids) if scored else None,
        sentence_recall=sentence_recall(result.items, q.supporting_sentences),
        complete=complete(set(ids), q.gold_doc_ids) if scored else None, expectation_met=met,
        answered=reply is not None, abstained=reply.abstained if reply else None,
        short_answer=reply.short_answer if reply else None,
        exact_match=exact_match(reply.short_answer, answers) if reply else None,
        f1=f1(reply.short_answer, answers) if reply else None,
        citations_valid=reply.citations_valid if claimed else None,
        citation_locatable=reply.citation_locatable if claimed else None,
        cited_gold=bool(set(reply.citations) & set(q.gold_doc_ids)) if reply else None,
        **_against_gold(reply, q),
        answer_in_gold=_answer_in_gold(reply, result, q) if reply else None,
        retrieve_s=round(seconds, 6), generate_s=round(reply.seconds, 6) if reply else None,
        llm_calls=llm.get("calls", 0) + (reply.llm_calls if reply else 0),
        input_tokens=llm.get("input_tokens", 0) + (reply.input_tokens if reply else 0),
        output_tokens=llm.get("output_tokens", 0) + (reply.output_tokens if reply else 0),
        long_answer=reply.long_answer if reply else None, replies=list(reply.replies) if reply else None)


def _against_gold(reply: Answer | None, q: EvalQuestion) -> dict:
    """Citation recall and precision against the gold documents, attributed share, short-answer support."""
    if reply is None:
        return dict.fromkeys(("citation_recall", "citation_precision", "citations_attributed",
                              "short_answer_supported"))
    cited, gold = set(reply.citations), set(q.gold_doc_ids)
    return {"citation_recall": len(cited & gold) / len(gold) if gold else None,
            "citation_precision": len(cited & gold) / len(cited) if cited and gold else None,
            "citations_attributed": reply.attributed / len(reply.sources) if reply.sources else None,
            "short_answer_supported": None if reply.abstained else reply.short_answer_check != "not found"}


def _answer_in_gold(reply: Answer, result: RetrievalResult, q: EvalQuestion) -> bool:
    """Evidence localisation: the reader's short answer is a span of a gold document as the context shows it."""
    span = normalize_answer(reply.short_answer)
    gold = normalize_answer(" ".join(i.text for i in result.items if i.doc_id in q.gold_doc_ids))
    return bool(span) and f" {span} " in f" {gold} "
