from __future__ import annotations

from typing import Optional

from dagster import ConfigurableResource

from rag.answer.llm import ChatModel, chat_model


class LLMResource(ConfigurableResource):
    """The readers' chat model: "extractive" (no LLM), "local" (embedded llama.cpp server, started on first
    use; RAG_LOCAL_MODEL picks the model) or "endpoint" (an OpenAI-compatible URL; unset fields fall back to
    OPENAI_BASE_URL, OPENAI_API_KEY, RAG_LLM_MODEL)."""

    reader: str = "extractive"
    base_url: Optional[str] = None
    api_key: Optional[str] = None
    model: Optional[str] = None
    timeout_s: float = 120.0
    max_retries: int = 3

    def chat_model(self) -> ChatModel | None:
        """None for the extractive reader; raises ValueError on an unknown reader, LLMError without an endpoint."""
        return chat_model(self.reader, base_url=self.base_url, api_key=self.api_key, model=self.model,
                          timeout=self.timeout_s, max_retries=self.max_retries)
