"""Derive the repository's benchmark slices (samples/benchmarks/) from full benchmark folders, deterministically.

    python bench/make_slices.py /path/to/benchmarks [--out samples/benchmarks] [--questions 50]

Questions are chosen by the order of sha256("slice|<benchmark>|<qid>") (a fair sample whatever the source file's
order) and written in that order, so the first N of a slice are a fair sample too. English slices keep each
question's context documents (gold and the benchmark's own distractors); the Chinese ones (one gold paragraph and no
distractors per question) keep the gold paragraphs, the other paragraphs of the same articles, and pseudo-random
paragraphs of other articles. Documents keep the source file's order and bytes. Re-running on the same input
rewrites identical files; MANIFEST.json records the input and output sha256.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import write_json  # noqa: E402

ENGLISH = ("hotpotqa", "musique", "2wikimultihopqa")
CHINESE = ("cmrc2018", "drcd")


def _rank(*parts: str) -> str:
    return hashlib.sha256("|".join(parts).encode()).hexdigest()


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def chosen_questions(name: str, lines: list[str], n: int) -> list[str]:
    """The n question lines of lowest sha256("slice|name|qid"), in that order."""
    return sorted(lines, key=lambda line: _rank("slice", name, json.loads(line)["qid"]))[:n]


def wanted_docs(name: str, questions: list[dict], docs: list[dict], per_question: int) -> set[str]:
    """Context documents (English); gold, same-article and pseudo-random paragraphs (Chinese)."""
    wanted = {d for q in questions for d in q.get("context_doc_ids") or q["gold_doc_ids"]}
    if name in ENGLISH:
        return wanted
    titles = {d["title"] for d in docs if d["doc_id"] in wanted}
    siblings = [d["doc_id"] for d in docs if d["title"] in titles and d["doc_id"] not in wanted]
    others = sorted((d["doc_id"] for d in docs if d["title"] not in titles), key=lambda i: _rank("distractor", name, i))
    budget = per_question * len(questions)
    return wanted | set(sorted(siblings, key=lambda i: _rank("sibling", name, i))[:budget // 2]) | \
        set(others[:budget - min(len(siblings), budget // 2)])


def make_slice(source: Path, dest: Path, name: str, n: int, per_question: int) -> dict:
    question_lines = [line for line in (source / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line]
    doc_lines = [line for line in (source / "docs.jsonl").read_text(encoding="utf-8").splitlines() if line]
    picked = chosen_questions(name, question_lines, n)
    docs = [json.loads(line) for line in doc_lines]
    keep = wanted_docs(name, [json.loads(line) for line in picked], docs, per_question)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "questions.jsonl").write_text("".join(line + "\n" for line in picked), encoding="utf-8")
    (dest / "docs.jsonl").write_text("".join(line + "\n" for line, d in zip(doc_lines, docs) if d["doc_id"] in keep),
                                     encoding="utf-8")
    missing = {g for line in picked for g in json.loads(line)["gold_doc_ids"]} - keep
    if missing:
        raise SystemExit(f"{source}: gold documents {sorted(missing)[:3]} are not in docs.jsonl")
    return {"questions": len(picked), "documents": len(keep),
            "input_sha256": {f: _sha256(source / f) for f in ("docs.jsonl", "questions.jsonl")},
            "output_sha256": {f: _sha256(dest / f) for f in ("docs.jsonl", "questions.jsonl")}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path, help="a folder holding hotpotqa/, musique/, 2wikimultihopqa/, cmrc2018/, drcd/")
    p.add_argument("--out", type=Path, default=REPO / "samples" / "benchmarks")
    p.add_argument("--questions", type=int, default=50, help="questions per English benchmark (default 50)")
    p.add_argument("--zh-questions", type=int, default=50, help="questions per Chinese benchmark (default 50)")
    p.add_argument("--zh-distractors", type=int, default=2, help="extra paragraphs per Chinese question (default 2)")
    args = p.parse_args()
    manifest = {"command": " ".join(["python bench/make_slices.py SOURCE", *sys.argv[2:]]),
                "rule": "questions: lowest sha256('slice|<benchmark>|<qid>'); see the module docstring"}
    for name in ENGLISH + CHINESE:
        if not (args.source / name / "questions.jsonl").is_file():
            p.exit(2, f"{p.prog}: {args.source / name}: no questions.jsonl (is {args.source} a benchmarks folder?)\n")
        english = name in ENGLISH
        manifest[name] = make_slice(args.source / name, args.out / name, name,
                                    args.questions if english else args.zh_questions, 0 if english else args.zh_distractors)
        print(f"{name}: {manifest[name]['questions']} questions, {manifest[name]['documents']} documents")
    write_json(args.out / "MANIFEST.json", manifest)


if __name__ == "__main__":
    main()
