"""`rag eval` on slices of the Chinese benchmarks (CMRC 2018 Simplified, DRCD Traditional): the same format,
the same report, the answer paragraphs found by both methods, answers scored character by character."""
import json
from pathlib import Path

import pytest
from test_eval_end_to_end import rag_eval

from rag.sources.benchmarks import benchmark_dir


def slice_of(name: str, dest: Path, n: int = 3, distractors: int = 12) -> Path:
    dest.mkdir(parents=True)
    source = benchmark_dir(name)
    questions = [json.loads(line) for line in (source / "questions.jsonl").open()][:n]
    gold = {d for q in questions for d in q["gold_doc_ids"]}
    docs = [line for line in (source / "docs.jsonl").open()]
    keep = [d for d in docs if json.loads(d)["doc_id"] in gold]
    keep += [d for d in docs if json.loads(d)["doc_id"] not in gold][:distractors]
    (dest / "docs.jsonl").write_text("".join(keep))
    (dest / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions))
    return dest


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cmrc2018", "drcd"])
def test_rag_eval_handles_a_chinese_benchmark(tmp_path, name):
    bench = slice_of(name, tmp_path / name)
    out = tmp_path / "out"
    assert rag_eval("--benchmark", str(bench), "--workspace", str(tmp_path / "ws"), "--methods", "longrag,elite",
                    "--budgets", "1000", "--out", str(out)) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").open()]
    assert {r["method"] for r in rows} == {"longrag", "elite"} and len(rows) == 6
    assert all(r["complete"] for r in rows), [(r["method"], r["qid"]) for r in rows if not r["complete"]]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["questions"] == 3 and (out / "report.md").is_file()
