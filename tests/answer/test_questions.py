"""`rag questions generate` against a real loopback HTTP server serving scripted OpenAI-compatible completions."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from test_longrag import publish

from rag.answer.question_generation import JUDGE, WRITE_MULTI, WRITE_SINGLE

DOCS = {  # doc id → (links, body)
    "alpha": (["beta"], "Pump P-7 runs at 1450 rpm on the north line."),
    "beta": (["alpha"], "The pump on the north line is serviced by team Blue every March."),
    "gamma": ([], "The gamma cabinet holds spare fuses."),
    "delta": (["epsilon"], "The delta valve carries code DV-22."),
    "epsilon": (["delta"], "The epsilon valve sits next to the delta valve."),
}
SINGLE = {"alpha": '{"question": "How fast does pump P-7 run?", "answer": "1450 rpm"}',
          "beta": "Sure! Here is a great question about pumps.",                       # no JSON: rejected
          "gamma": '{"question": "What colour is the gamma cabinet?", "answer": "red"}',  # judged unanswerable
          "delta": '{"question": "What code does the delta valve carry?", "answer": "DV-22"}',
          "epsilon": '{"question": "What code does the delta valve carry?", "answer": "DV-22"}'}  # a duplicate
MULTI = {("alpha", "beta"): '{"question": "Which team services the pump that runs at 1450 rpm?", "answer": "team Blue"}',
         ("delta", "epsilon"): '{"question": "Which valve carries code DV-22?", "answer": "delta"}'}


def judge(question: str, shown: set[str]) -> bool:
    """What the scripted judge answers: the facts each question needs, by document."""
    needs = {"How fast does pump P-7 run?": [{"alpha"}],
             "What colour is the gamma cabinet?": [],
             "What code does the delta valve carry?": [{"delta"}, {"epsilon"}],
             "Which team services the pump that runs at 1450 rpm?": [{"alpha", "beta"}],
             "Which valve carries code DV-22?": [{"delta"}]}[question]
    return any(need <= shown for need in needs)


class Scripted(BaseHTTPRequestHandler):
    calls: list[dict] = []

    def do_POST(self):  # noqa: N802 - the http.server API
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
        shown = set(re.findall(r"^\[([a-z]+)\]$", user, flags=re.M))
        if system == WRITE_SINGLE:
            (doc,) = shown
            text = SINGLE[doc]
        elif system == WRITE_MULTI:
            text = MULTI[tuple(sorted(shown))]
        elif system == JUDGE:
            question = user.rsplit("Question: ", 1)[1]
            text = json.dumps({"answerable": judge(question, shown)})
        else:
            self.send_error(400)
            return
        Scripted.calls.append({"system": system, "shown": sorted(shown)})
        reply = {"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                 "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": len(user) // 4, "completion_tokens": len(text) // 4,
                           "total_tokens": (len(user) + len(text)) // 4}}
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(monkeypatch):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    Scripted.calls = []
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{httpd.server_port}/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("RAG_LLM_MODEL", "scripted")
    yield httpd
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def workspace(tmp_path, embedder):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for doc_id, (links, body) in DOCS.items():
        (corpus / f"{doc_id}.md").write_text(f"---\nid: {doc_id}\ntitle: The {doc_id} page\nversion: \"1\"\n"
                                             f"acl: [ops]\nlinks: [{', '.join(links)}]\n---\n{body}\n")
    catalog, _ = publish(tmp_path / "ws", [corpus], embedder)
    catalog.close()
    return tmp_path / "ws"


def test_only_questions_the_judge_finds_answerable_and_truly_multi_document_are_kept(server, workspace, tmp_path,
                                                                                      capsys):
    from pipelines.cli import main

    out = tmp_path / "questions.jsonl"
    assert main(["questions", "generate", "--workspace", str(workspace), "--reader", "endpoint", "--single", "5",
                 "--multi", "5", "--out", str(out)]) == 0
    kept = [json.loads(line) for line in out.open()]
    by_question = {q["question"]: q for q in kept}
    assert set(by_question) == {"How fast does pump P-7 run?", "What code does the delta valve carry?",
                                "Which team services the pump that runs at 1450 rpm?"}
    multi = by_question["Which team services the pump that runs at 1450 rpm?"]
    assert sorted(multi["gold_doc_ids"]) == ["alpha", "beta"] and multi["type"] == "multi" and multi["n_hops"] == 2
    assert by_question["How fast does pump P-7 run?"]["gold_doc_ids"] == ["alpha"]
    assert all(q["asked_as"] == ["ops"] and q["answer"] and q["qid"].startswith("gen-") for q in kept)
    printed = capsys.readouterr().out
    assert "kept 3 of 7 questions" in printed
    for reason in ("the writer gave no question and answer", "not answerable from its gold documents",
                   "answerable from one gold document alone", "duplicate question"):
        assert f"rejected 1: {reason}" in printed
    # The multi-document question that was kept was put to the judge with each document alone, and refused.
    alone = [c["shown"] for c in Scripted.calls if c["system"] == JUDGE and len(c["shown"]) == 1]
    assert ["alpha"] in alone and ["beta"] in alone
    assert f"({len(Scripted.calls)} LLM calls" in printed


def test_the_generated_file_is_an_evaluation_set(server, workspace, tmp_path):
    from pipelines.cli import main
    from rag.evaluation import load_questions

    out = tmp_path / "questions.jsonl"
    assert main(["questions", "generate", "--workspace", str(workspace), "--reader", "endpoint", "--single", "5",
                 "--multi", "0", "--out", str(out)]) == 0
    loaded = load_questions(out)
    assert {q.kind for q in loaded} == {"single"} and all(q.asked_as == ("ops",) for q in loaded)


def test_an_unreachable_endpoint_is_a_one_line_error(workspace, tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    code = main(["questions", "generate", "--workspace", str(workspace), "--reader", "endpoint", "--single", "1",
                 "--multi", "0", "--out", str(tmp_path / "q.jsonl")])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "cannot reach LLM endpoint" in err and "\n" not in err
