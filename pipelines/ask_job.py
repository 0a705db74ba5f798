"""A job that answers one configured question, so anyone can ask from the Dagster UI's launchpad."""
import dagster as dg

from rag.answer.reader import answer
from rag.retrieval.callers import resolve_caller
from resources import EmbedderResource, ReadSideResource
from resources.llm import LLMResource


class AskConfig(dg.Config):
    question: str
    groups: list[str]
    method: str = "longrag"   # longrag | shortchunk | elite
    budget: int = 2000


@dg.op(description="Retrieve as the configured caller, answer with the configured reader, log the citations.")
def answer_question(context: dg.OpExecutionContext, config: AskConfig, read_side: ReadSideResource,
                    embedder: EmbedderResource, llm: LLMResource) -> dict:
    caller, model = resolve_caller(groups=config.groups), llm.chat_model()
    # The read side: the published snapshot, so asking never waits for (or blocks) an ingest run.
    ws = read_side.open(embedder)
    try:
        result = ws.retrieve(config.method, caller, config.question, config.budget, model=model)
        reply = answer(config.question, result, model, ws.embedder)
    finally:
        ws.close()
    context.log.info(f"[{reply.reader}] {reply.short_answer} — cites {', '.join(reply.citations) or 'nothing'}")
    context.add_output_metadata({
        "answer": dg.MetadataValue.md(reply.long_answer), "short_answer": reply.short_answer,
        "citations": reply.citations, "citations_valid": reply.citations_valid,
        "citation_locatable": reply.citation_locatable, "citations_attributed": reply.attributed,
        "short_answer_check": reply.short_answer_check, "withheld": reply.withheld, "reader": reply.reader, "method": result.method,
        "context_tokens": result.tokens, "documents": [f"{i.doc_id} v{i.doc_version}" for i in result.items]})
    return reply.to_json()


@dg.job(description="Answer one question (set question, groups, method and budget in the launchpad).")
def ask():
    answer_question()
