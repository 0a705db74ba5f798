"""One code path for every LLM: the `openai` client against an OpenAI-compatible endpoint."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Protocol

from rag.store.url_settings import LLM_URL, http_url, masked, redact, setting


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    seconds: float
    model: str


class LLMError(RuntimeError):
    """The endpoint could not answer; the message says which endpoint and why, in one line."""


class ChatModel(Protocol):
    name: str
    schema_output: bool  # complete(schema=…) constrains the output to that JSON schema

    def complete(self, messages: list[dict], *, max_tokens: int = 256, json_object: bool = False,
                 schema: dict | None = None) -> Completion: ...


class OpenAIChat:
    """Chat completions with timeouts and retries (exponential backoff on 408/429/5xx, by the openai client)."""

    def __init__(self, base_url: str, model: str, api_key: str = "not-needed", timeout: float = 120.0,
                 max_retries: int = 3, kind: str = "endpoint", schema_output: bool = False):
        import openai

        self.name = model
        self.kind = kind  # "endpoint" or "local": reports name the reader "<kind>:<model>"
        self.base_url = base_url
        self.shown = masked(base_url)  # what messages name: a password or key in the URL is never shown
        self.temperature = 0.0  # greedy: the same question and context give the same answer
        # Set only for a server known to honour llama-cpp-python's {"type": "json_object", "schema": …}: an unknown
        # endpoint may ignore or refuse it, so it gets plain prompts.
        self.schema_output = schema_output
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)

    def complete(self, messages: list[dict], *, max_tokens: int = 256, json_object: bool = False,
                 schema: dict | None = None) -> Completion:
        """One chat completion; `schema` (only where `schema_output`) constrains the output to that JSON schema."""
        import openai

        if schema is not None and not self.schema_output:
            raise ValueError(f"{self.shown} is not known to constrain output to a JSON schema")
        extra = {"response_format": {"type": "json_object", **({"schema": schema} if schema else {})}} \
            if json_object or schema else {}
        start = time.perf_counter()
        try:
            resp = self._client.chat.completions.create(model=self.name, messages=messages, max_tokens=max_tokens,
                                                        temperature=self.temperature, **extra)
        except openai.APITimeoutError:
            raise LLMError(f"LLM endpoint {self.shown} timed out") from None
        except openai.APIConnectionError as err:
            raise LLMError(redact(f"cannot reach LLM endpoint {self.shown}: {err.__cause__ or err}")) from None
        except openai.APIStatusError as err:
            raise LLMError(redact(f"LLM endpoint {self.shown} answered HTTP {err.status_code}: "
                                  f"{(str(err.message).splitlines() or [''])[0]}")) from None
        usage = resp.usage
        return Completion(text=resp.choices[0].message.content or "",
                          input_tokens=usage.prompt_tokens if usage else 0,
                          output_tokens=usage.completion_tokens if usage else 0,
                          seconds=time.perf_counter() - start, model=self.name)


def parse_json(text: str) -> dict:
    """The first JSON object in a model's answer ({} when there is none): small models wrap JSON in prose."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
            if isinstance(value, dict):
                return value
        except json.JSONDecodeError:
            pass
        start = text.find("{", start + 1)
    return {}


READERS = ("local", "endpoint", "extractive")
DEFAULT_ENDPOINT_MODEL = "gpt-4o-mini"


def chat_model(reader: str, *, base_url: str | None = None, api_key: str | None = None, model: str | None = None,
               timeout: float = 120.0, max_retries: int = 3) -> ChatModel | None:
    """The chat model behind a reader: "endpoint" (arguments, else OPENAI_BASE_URL / OPENAI_API_KEY /
    RAG_LLM_MODEL), "local" (this process's embedded llama.cpp server), or None for "extractive"."""
    if reader == "extractive":
        return None
    if reader == "endpoint":
        url = http_url(LLM_URL, base_url) if base_url else setting(LLM_URL)
        if not url:
            raise LLMError("reader 'endpoint' needs an LLM endpoint: set OPENAI_BASE_URL (and OPENAI_API_KEY, "
                           "RAG_LLM_MODEL), or use reader 'local' or 'extractive'")
        return OpenAIChat(url, model or os.environ.get("RAG_LLM_MODEL") or DEFAULT_ENDPOINT_MODEL,
                          api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                          timeout=timeout, max_retries=max_retries)
    if reader == "local":
        from rag.answer.local_llm import LocalLLMError, shared_server

        try:
            server = shared_server()
        except LocalLLMError as err:  # not installed, unknown, or its server would not start: the caller's one line
            raise LLMError(str(err)) from None
        return OpenAIChat(server.base_url, server.model_name, timeout=timeout, max_retries=max_retries, kind="local",
                          schema_output=True)
    raise ValueError(f"unknown reader {reader!r}; expected one of {', '.join(READERS)}")
