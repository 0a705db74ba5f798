"""The README and docs/ stay short reference for a reader: figures equal to bench/results/, pages within their
length, each opening with its question, and nothing dated by a work round or a commit, or pointing outside."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench import figures  # noqa: E402

DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [REPO / "README.md", REPO / "bench" / "README.md", REPO / "deploy" / "README.md", *DOCS]

# A work round ("session 41", "round 3", "turn 2"), an issue number, a commit hash (7–12 hex characters with a letter
# and a digit), a machine's load, or a file outside the repository.
FORBIDDEN = {
    "a work round": re.compile(r"\b(sessions?|turns?|round) \d|\bthis (round|session)\b", re.IGNORECASE),
    "an issue number": re.compile(r"\bissues? #?\d", re.IGNORECASE),
    "a commit hash": re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,12}\b"),
    "a load average": re.compile(r"\bload (average|avg)|\bload \d", re.IGNORECASE),
    "a file outside the repository": re.compile(r"DESIGN\.md|STACK\.md|\.\./shared|/work/"),
}


def test_the_readme_reads_in_ten_minutes():
    assert len((REPO / "README.md").read_text(encoding="utf-8").splitlines()) <= 250


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_a_docs_page_opens_with_its_question_and_stays_short(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 320, f"{page.name}: {len(lines)} lines; split it by question"
    assert lines[0].startswith("# ") and lines[0].endswith("?"), f"{page.name} opens with {lines[0]!r}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_page_dates_anything_by_its_history_or_points_outside_the_repository(page):
    found = [f"{page.relative_to(REPO)}:{n}: {what}: {m.group(0)!r}"
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for what, pattern in FORBIDDEN.items() for m in pattern.finditer(line)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("text, what", [("as session 41 measured", "a work round"), ("since round 3", "a work round"),
                                        ("at 48e39bc (before)", "a commit hash"), ("load 13–17", "a load average"),
                                        ("see ../shared/DESIGN.md", "a file outside the repository"),
                                        ("issue 26's goal", "an issue number")])
def test_each_forbidden_pattern_is_caught(text, what):
    assert FORBIDDEN[what].search(text)


@pytest.mark.parametrize("text", ["python bench/embed_runtimes.py --texts 512 --rounds 3", "1,001,000 sub-chunks",
                                  "sha256 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                                  "a round of exploration", "the 1000000 rows"])
def test_commands_counts_and_checksums_are_not_history(text):
    assert not any(pattern.search(text) for pattern in FORBIDDEN.values())


def test_every_rendered_figure_equals_its_results_file():
    assert figures.main(["--check"]) == 0, "run python bench/figures.py and commit what it changes"


def test_a_results_file_that_moved_makes_the_check_fail_and_names_the_page(monkeypatch, capsys):
    real = figures.load

    def moved(name: str) -> dict:
        data = real(name)
        if name == "serve-load.json":
            data = json.loads(json.dumps(data))
            data["requests_per_s"] += 1
        return data
    monkeypatch.setattr(figures, "load", moved)
    before = {path: path.read_text(encoding="utf-8") for path in figures.TARGETS}
    assert figures.main(["--check"]) == 1
    assert "README.md" in capsys.readouterr().out
    assert {path: path.read_text(encoding="utf-8") for path in figures.TARGETS} == before  # check mode writes nothing


def test_every_figure_names_the_machine_it_ran_on():
    for section in figures.sections().values():
        for figure in section:
            for name in figure.files:
                machine = figures.load(name).get("machine")
                assert machine and machine["cores"] and machine["cpu"], f"{name} records no machine"


def test_a_results_file_without_its_machine_is_refused(monkeypatch):
    real = figures.load
    monkeypatch.setattr(figures, "load", lambda name: {k: v for k, v in real(name).items() if k != "machine"})
    with pytest.raises(SystemExit, match="no machine recorded"):
        figures.headline_table()


def test_every_bench_is_listed_with_its_command_in_bench_readme():
    listed = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((REPO / "bench").glob("*.py")) if f"bench/{p.name}" not in listed]
    assert not missing, f"bench/README.md does not list {missing}"
