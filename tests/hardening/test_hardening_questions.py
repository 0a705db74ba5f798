"""A questions file refuses every wrongly typed field with one line naming the file, the line
and the question id; nothing is coerced (a string of gold ids was read letter by letter)."""
import json

import pytest

from rag.evaluation.questions import QuestionsError, caller_for, load_questions
from rag.retrieval.callers import Caller
from rag.text.analysis import MAX_QUESTION_CHARS

GOOD = {"qid": "q1", "question": "How long is the cache kept?", "answer": "7 days", "gold_doc_ids": ["cache"]}


def write(tmp_path, *records) -> str:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("change, reason", [
    ({"gold_doc_ids": "s1"}, "gold_doc_ids must be a list of strings, not a string"),
    ({"gold_doc_ids": {"a": 1}}, "gold_doc_ids must be a list of strings, not an object"),
    ({"gold_doc_ids": ["a", None]}, "gold_doc_ids must be a list of strings; it holds null"),
    ({"gold_doc_ids": [["a"]]}, "gold_doc_ids must be a list of strings; it holds a list"),
    ({"gold_doc_ids": [True]}, "gold_doc_ids must be a list of strings; it holds a boolean"),
    ({"question": 5}, "question must be a string, not a number 5"),
    ({"question": ["what?"]}, "question must be a string, not a list"),
    ({"question": None}, "missing field 'question'"),
    ({"question": "   "}, "question is empty"),
    ({"question": "x" * (MAX_QUESTION_CHARS + 1)}, "question is 2,001 characters long; the limit is 2,000"),
    ({"expect": {"absent_version": None}}, "expect absent_version must be a version label, not null"),
    ({"expect": {"absent_version": True}}, "expect absent_version must be a version label, not a boolean"),
    ({"expect": {"absent_version": ["2025"]}}, "expect absent_version must be a version label, not a list"),
    ({"expect": {"absent_version": "draft"}}, "expect absent_version: version label 'draft' cannot be ordered"),
    ({"expect": {"absent_version": "2025", "also": 1}}, "expect must be"),
    ({"expect": None}, "expect must be"),
    ({"expect": "NOT_FOUND"}, "expect must be"),
    ({"answer": ["7 days"]}, "answer must be a string or a whole number, not a list"),
    ({"answer_aliases": "seven days"}, "answer_aliases must be a list of strings, not a string"),
    ({"n_hops": "2"}, "n_hops must be a whole number from 1 to 100"),
    ({"n_hops": 0}, "n_hops must be a whole number from 1 to 100"),
    ({"n_hops": 10 ** 30}, "n_hops must be a whole number from 1 to 100"),
    ({"type": 3}, "type must be a string, not a number 3"),
    ({"supporting_facts": "x"}, "supporting_facts must be a list of objects"),
    ({"supporting_facts": ["x"]}, "supporting_facts must be a list of objects"),
    ({"asked_as": 7}, "asked_as must be a user name or a non-empty list of groups"),
])
def test_a_wrongly_typed_field_is_refused_naming_file_line_and_question(tmp_path, change, reason):
    path = write(tmp_path, GOOD | {"qid": "q0"}, GOOD | change)
    with pytest.raises(QuestionsError) as err:
        load_questions(path)
    message = str(err.value)
    assert message.startswith(f"{path}:2: question q1: "), message
    assert reason in message
    assert "\n" not in message and len(message) < 400


@pytest.mark.parametrize("qid, shown", [(None, "missing field 'qid'"), (1.5, "qid must be a string or a whole number"),
                                        (True, "qid must be a string or a whole number")])
def test_a_question_without_a_usable_id_still_names_file_and_line(tmp_path, qid, shown):
    path = write(tmp_path, GOOD | {"qid": qid})
    with pytest.raises(QuestionsError, match=f"^{path}:1: {shown}"):
        load_questions(path)


@pytest.mark.parametrize("line, reason", [("[1, 2]", "each line must be a JSON object"), ("{bad", "not valid JSON"),
                                          ("[" * 100_000 + "]" * 100_000, "")])
def test_lines_that_are_not_objects_are_refused_in_one_line(tmp_path, line, reason):
    path = write(tmp_path, line)
    with pytest.raises(QuestionsError) as err:
        load_questions(path)
    assert str(err.value).startswith(f"{path}:1: ") and reason in str(err.value)
    assert "\n" not in str(err.value)


def test_a_file_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_bytes(b'{"qid": "a", "question": "caf\xe9?"}\n')
    with pytest.raises(QuestionsError, match="cannot read questions \\(not UTF-8\\)"):
        load_questions(path)


def test_well_typed_questions_load_unchanged(tmp_path):
    path = write(tmp_path, GOOD, GOOD | {"qid": 7, "gold_doc_ids": ["a", 12], "expect": {"absent_version": 2025},
                                         "answer": 7, "n_hops": 3, "question": "y" * MAX_QUESTION_CHARS})
    a, b = load_questions(path)
    assert (a.qid, a.gold_doc_ids, a.hops, a.where) == ("q1", ("cache",), 1, f"{path}:1")
    assert (b.qid, b.gold_doc_ids, b.absent_version, b.answer, b.hops) == ("7", ("a", "12"), "2025", "7", 3)


def test_an_unknown_asker_is_refused_naming_file_line_and_question(tmp_path):
    path = write(tmp_path, GOOD | {"asked_as": "mallory"})
    (q,) = load_questions(path)
    with pytest.raises(QuestionsError, match=f"^{path}:1: question q1: asked_as user 'mallory' is not in the users"):
        caller_for(q, None, {"alice": Caller(frozenset({"support"}))})
