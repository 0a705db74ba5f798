"""OpenAIChat against a real HTTP server on loopback: answers, retries, time-outs, errors; and the reader factory."""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rag.answer.llm import LLMError, OpenAIChat, chat_model, parse_json


@dataclass
class Reply:
    status: int = 200
    text: str = "OK"
    prompt_tokens: int = 11
    completion_tokens: int = 3
    stall: float = 0.0          # seconds to wait before answering
    headers: dict = field(default_factory=dict)


class FakeOpenAI:
    """A chat-completions server on 127.0.0.1 that plays scripted replies (the last one repeats) and keeps
    every request body it received."""

    def __init__(self, replies: list[Reply]):
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.released = threading.Event()  # set at shutdown so a stalled handler returns at once
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._http.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._http.server_port}/v1"

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                reply = fake.replies.pop(0) if len(fake.replies) > 1 else fake.replies[0]
                if reply.stall:
                    fake.released.wait(reply.stall)
                payload = ({"id": "c1", "object": "chat.completion", "created": 0, "model": body["model"],
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": reply.text}}],
                            "usage": {"prompt_tokens": reply.prompt_tokens,
                                      "completion_tokens": reply.completion_tokens,
                                      "total_tokens": reply.prompt_tokens + reply.completion_tokens}}
                           if reply.status == 200 else {"error": {"message": f"scripted {reply.status}"}})
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    for key, value in {"Content-Type": "application/json", **reply.headers}.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (time-out tests)

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self) -> FakeOpenAI:
        threading.Thread(target=self._http.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.released.set()
        self._http.shutdown()
        self._http.server_close()


def ask(model: OpenAIChat, **kwargs):
    return model.complete([{"role": "user", "content": "Say OK."}], **kwargs)


def test_a_normal_completion_returns_text_usage_and_model():
    with FakeOpenAI([Reply(text="OK, done.", prompt_tokens=17, completion_tokens=4)]) as server:
        done = ask(OpenAIChat(server.base_url, "tiny", max_retries=0), max_tokens=8)
    assert (done.text, done.input_tokens, done.output_tokens, done.model) == ("OK, done.", 17, 4, "tiny")
    assert server.requests[0]["max_tokens"] == 8
    assert server.requests[0]["messages"] == [{"role": "user", "content": "Say OK."}]
    assert "response_format" not in server.requests[0]


def test_json_object_mode_sends_the_json_object_response_format():
    with FakeOpenAI([Reply(text='{"terms": ["cache"]}')]) as server:
        done = ask(OpenAIChat(server.base_url, "tiny", max_retries=0), json_object=True)
    assert server.requests[0]["response_format"] == {"type": "json_object"}
    assert parse_json(done.text) == {"terms": ["cache"]}


def test_rate_limited_twice_then_answered_succeeds_after_two_retries():
    too_many = Reply(status=429, headers={"retry-after-ms": "20"})
    with FakeOpenAI([too_many, too_many, Reply(text="third time")]) as server:
        done = ask(OpenAIChat(server.base_url, "tiny", max_retries=2))
    assert done.text == "third time"
    assert len(server.requests) == 3


def test_rate_limited_beyond_the_retry_budget_is_an_error_naming_the_status():
    with FakeOpenAI([Reply(status=429, headers={"retry-after-ms": "20"})]) as server:
        with pytest.raises(LLMError, match="HTTP 429"):
            ask(OpenAIChat(server.base_url, "tiny", max_retries=1))
    assert len(server.requests) == 2


def test_a_stalled_endpoint_times_out_quickly_with_a_clear_error():
    with FakeOpenAI([Reply(stall=10.0)]) as server:
        began = time.perf_counter()
        with pytest.raises(LLMError, match="timed out") as err:
            ask(OpenAIChat(server.base_url, "tiny", timeout=0.5, max_retries=0))
        elapsed = time.perf_counter() - began
    assert server.base_url in str(err.value)
    assert elapsed < 3.0


def test_a_server_error_is_an_llm_error_with_the_status_and_message():
    with FakeOpenAI([Reply(status=500)]) as server:
        with pytest.raises(LLMError, match="HTTP 500") as err:
            ask(OpenAIChat(server.base_url, "tiny", max_retries=0))
    assert "scripted 500" in str(err.value)
    assert len(server.requests) == 1


def test_an_unreachable_endpoint_is_an_llm_error_naming_it():
    with FakeOpenAI([Reply()]) as server:
        url = server.base_url
    with pytest.raises(LLMError, match="cannot reach") as err:
        ask(OpenAIChat(url, "tiny", timeout=2, max_retries=0))
    assert url in str(err.value)


def test_parse_json_finds_the_object_inside_prose():
    text = 'Sure! Here is the JSON you asked for: {"sufficient": true, "terms": ["a {b}"]} Hope it helps {.'
    assert parse_json(text) == {"sufficient": True, "terms": ["a {b}"]}


def test_parse_json_skips_non_objects_and_returns_empty_without_json():
    assert parse_json('[1, 2] then {"k": 1}') == {"k": 1}
    assert parse_json("no json here { at all") == {}


def test_extractive_reader_needs_no_chat_model():
    assert chat_model("extractive") is None


def test_endpoint_reader_without_a_base_url_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(LLMError, match="OPENAI_BASE_URL"):
        chat_model("endpoint")


def test_endpoint_reader_is_configured_from_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "secret")
    monkeypatch.setenv("RAG_LLM_MODEL", "house-model")
    model = chat_model("endpoint", timeout=5, max_retries=0)
    assert (model.base_url, model.name, model.kind) == ("http://127.0.0.1:9/v1", "house-model", "endpoint")


def test_endpoint_reader_arguments_override_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    model = chat_model("endpoint", base_url="http://127.0.0.1:10/v1", model="other")
    assert (model.base_url, model.name) == ("http://127.0.0.1:10/v1", "other")


def test_an_unknown_reader_is_refused_listing_the_choices():
    with pytest.raises(ValueError, match="local, endpoint, extractive"):
        chat_model("oracle")


def test_llm_resource_hands_out_the_configured_reader_model(monkeypatch):
    from resources.llm import LLMResource

    monkeypatch.delenv("RAG_LLM_MODEL", raising=False)
    model = LLMResource(reader="endpoint", base_url="http://127.0.0.1:9/v1", model="m", timeout_s=3).chat_model()
    assert (model.base_url, model.name) == ("http://127.0.0.1:9/v1", "m")
    assert LLMResource().chat_model() is None
