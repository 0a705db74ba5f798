"""The shape of the code: `rag/` in layers that import only downwards, no circles, SQL only in the store."""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from conftest import REPO

# Lowest first: a package may import its own layer and the ones before it, never one after it.
LAYERS = ["text", "models", "sources", "units", "store", "retrieval", "answer", "elite", "query", "evaluation"]
SQL = re.compile(r"\b(SELECT\b.+\bFROM|INSERT INTO|UPDATE \w+ SET|DELETE FROM|CREATE (TEMP )?(TABLE|VIEW))\b", re.S)
# The evaluation's report database is an in-memory DuckDB of its own result rows, not the catalog.
SQL_ALLOWED_OUTSIDE_STORE = {"rag.evaluation.report"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((REPO / "rag").rglob("*.py")):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> set[str]:
    """Every `rag` module this file imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "rag":
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in MODULES else node.module)
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "rag"}
    return out


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[1])


def test_every_module_lives_in_a_layer_package_that_says_what_it_owns():
    loose = [m for m in MODULES if m.count(".") < 1 or (m.count(".") == 1 and m.split(".")[1] not in LAYERS)]
    assert loose == ["rag"]
    for layer in LAYERS:
        doc = ast.get_docstring(ast.parse((REPO / "rag" / layer / "__init__.py").read_text()))
        assert doc and "import" in doc, f"rag/{layer}/__init__.py must say what it owns and may import"


def test_packages_import_only_their_own_layer_or_the_layers_below():
    upward = [f"{m} imports {i}" for m, p in MODULES.items() if m != "rag"
              for i in _imports(p) if i != "rag" and _layer(i) > _layer(m)]
    assert upward == []


def test_no_module_imports_itself_in_a_circle():
    graph = {m: {i for i in _imports(p) if i in MODULES and i != m} for m, p in MODULES.items()}
    # A package's __init__ importing its own modules is not a circle through them.
    graph = {m: {i for i in deps if not m.startswith(i + ".")} for m, deps in graph.items()}
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert circles == []


def test_the_core_never_imports_dagster():
    users = [m for m, p in MODULES.items()
             if re.search(r"^\s*(import dagster|from dagster)", p.read_text(), re.M)]
    assert users == []


def test_sql_is_written_only_in_the_store():
    outside = defaultdict(int)
    for m, p in MODULES.items():
        if m.startswith("rag.store") or m in SQL_ALLOWED_OUTSIDE_STORE:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SQL.search(node.value):
                outside[m] += 1
    assert dict(outside) == {}


def test_no_module_outgrows_one_concept():
    long = {str(p.relative_to(REPO)): n for p in MODULES.values() if (n := len(p.read_text().splitlines())) > 400}
    assert long == {}


def test_no_function_takes_more_than_seven_parameters():
    """Bind state once (a Workspace, an Evaluator, IngestSettings, Request and Tools) instead of long signatures."""
    long = []
    for top in ("rag", "pipelines", "assets", "resources"):
        for path in (REPO / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    args = node.args
                    names = [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]
                    if len([n for n in names if n not in ("self", "cls")]) > 7:
                        long.append(f"{path.relative_to(REPO)}:{node.name}")
    assert long == []


def test_no_two_modules_share_a_name():
    """resources/ is left out on purpose: each resource is named for the core object it hands out."""
    names = defaultdict(list)
    for top in ("rag", "pipelines", "assets"):
        for path in (REPO / top).rglob("*.py"):
            if path.name != "__init__.py":
                names[path.stem].append(str(path.relative_to(REPO)))
    assert {n: paths for n, paths in names.items() if len(paths) > 1} == {}


def test_loading_the_code_location_reads_no_setting_and_creates_nothing(tmp_path):
    workspace = tmp_path / "never-created"
    env = {**os.environ, "RAG_WORKSPACE": str(workspace), "RAG_SOURCES": str(tmp_path / "missing")}
    probe = ("import pipelines.definitions as d, dagster as dg; "
             "print(isinstance(d.defs, dg.Definitions))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "False"   # a function Dagster calls when it loads the location
    assert not workspace.exists()
