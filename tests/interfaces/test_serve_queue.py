"""A `rag serve` worker computes one retrieval at a time, in arrival order, and answers /healthz meanwhile: requests
sharing the worker's GIL took as long as all of them together (pipelines/server.py)."""
import asyncio
import threading
from pathlib import Path

import httpx

from pipelines.server import Identity, create_app
from rag.query.workspace import Workspace
from rag.retrieval.callers import Caller

QUESTIONS = ["How are gateway certificates rotated?", "Which error code means the gateway cache is full?",
             "How long does the offline cache hold telemetry?", "How is a gateway grounded?",
             "What does the reconnect backoff do?", "How do I read the modbus alarm log?"]


class Recorder:
    """The workspace's retrieve, recording the order of entries and how many ran at once; the first waits for a
    signal, so the others arrive while it runs."""

    def __init__(self, workspace: Workspace):
        self.retrieve, self.entered, self.running, self.most = workspace.retrieve, [], 0, 0
        self.first_started, self.release, self.guard = threading.Event(), threading.Event(), threading.Lock()

    def __call__(self, method, caller, question, budget, **kwargs):
        with self.guard:
            self.running += 1
            self.most = max(self.most, self.running)
            self.entered.append(question)
        try:
            if len(self.entered) == 1:
                self.first_started.set()
                assert self.release.wait(60), "the test never released the first request"
            return self.retrieve(method, caller, question, budget, **kwargs)
        finally:
            with self.guard:
                self.running -= 1


def test_a_worker_retrieves_one_request_at_a_time_in_arrival_order_and_answers_health_meanwhile(published_sample):
    catalog, _ = published_sample
    workspace = Workspace(Path(catalog.path).parent)
    recorder = Recorder(workspace)
    workspace.retrieve = recorder
    app = create_app(workspace, Identity({"u": Caller(frozenset({"support", "everyone"}))}))

    async def scenario():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://serve") as client:
            ask = lambda q: client.post("/retrieve", json={"question": q, "user": "u", "method": "shortchunk"})  # noqa: E731
            first = asyncio.create_task(ask(QUESTIONS[0]))
            await asyncio.to_thread(recorder.first_started.wait, 60)
            waiting = []
            for question in QUESTIONS[1:]:  # each queued before the next is sent
                waiting.append(asyncio.create_task(ask(question)))
                await asyncio.sleep(0.05)
            health = await asyncio.wait_for(client.get("/healthz"), 30)  # while the first still holds the worker
            assert recorder.entered == QUESTIONS[:1], "a later request started before the first finished"
            recorder.release.set()
            return health, [await first] + [await w for w in waiting]

    health, answers = asyncio.run(scenario())
    assert health.status_code == 200 and health.json()["status"] == "ok"
    assert [a.status_code for a in answers] == [200] * len(QUESTIONS)
    assert all(a.json()["items"] for a in answers)
    assert recorder.most == 1 and recorder.entered == QUESTIONS
    workspace.close()
