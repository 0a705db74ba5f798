"""What a vector stands for: the sub-chunk recipe (sentence windows, title in front of the embedded text only),
recorded in the index, and a change of recipe re-cuts every unit instead of mixing two recipes' vectors."""
import numpy as np
import pytest
from conftest import SAMPLES
from hypothesis import given
from hypothesis import strategies as st

from rag.models.tokens import default_counter
from rag.store import consistency
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex, schema
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.settings import IngestSettings
from rag.units.chunking import Span, pack
from rag.units.subchunk_recipe import LEGACY_RECIPE_NAME, SubchunkRecipe, embedded_text, windows


def sentences_of(counts: list[int]) -> list[Span]:
    spans, cursor = [], 0
    for n in counts:
        spans.append(Span(cursor, cursor + 10 * n, n))
        cursor += 10 * n + 1
    return spans


@given(st.lists(st.integers(1, 40), max_size=30), st.integers(8, 64), st.integers(0, 40))
def test_windows_cover_every_sentence_in_order_and_overlap_by_at_most_the_overlap(counts, target, overlap):
    overlap = min(overlap, target - 1)
    spans = sentences_of(counts)
    out = windows(spans, target + 16, target, overlap)
    starts = {s.start: i for i, s in enumerate(spans)}
    ends = {s.end: i for i, s in enumerate(spans)}
    covered = set()
    for prev, w in zip([None, *out], out):
        first, last = starts[w.start], ends[w.end]          # windows start and end on sentence boundaries
        assert w.tokens == sum(counts[first:last + 1])
        assert w.tokens <= target + 16 or first == last     # only a single sentence may exceed the maximum
        if prev is not None:
            assert prev.start < w.start                     # always further on
            shared = [i for i in range(first, last + 1) if spans[i].end <= prev.end]
            assert sum(counts[i] for i in shared) <= overlap
        covered |= set(range(first, last + 1))
    assert covered == set(range(len(spans)))


@given(st.lists(st.integers(1, 40), max_size=30), st.integers(8, 64))
def test_windows_without_overlap_are_the_greedy_packing(counts, target):
    spans = sentences_of(counts)
    assert windows(spans, target + 16, target, 0) == pack(spans, target + 16, target)


def test_a_recipe_that_cannot_be_cut_is_refused_in_one_line():
    for bad in ((0, 64, 0), (80, 64, 0), (64, 64, 64)):
        with pytest.raises(ValueError, match="sub-chunk recipe"):
            SubchunkRecipe(*bad)


def publish(catalog, index, embedder, recipe: SubchunkRecipe):
    settings = IngestSettings(sources=[str(SAMPLES / "corpus")], chunk_target=recipe.target_tokens,
                              chunk_max=recipe.max_tokens, chunk_overlap=recipe.overlap_tokens)
    publish_documents(catalog, settings)
    publish_units(catalog, default_counter(), settings)
    return publish_index(catalog, index, embedder.encode, default_counter(), settings)


def rows(index):
    data, vectors = index.rows(["doc_id", "doc_version", "char_start", "char_end"])
    return [dict(r, vector=v) for r, v in zip(data.to_pylist(), vectors.to_pylist())]


@pytest.mark.slow
def test_a_vector_stands_for_the_title_and_its_sub_chunk_while_offsets_point_into_the_document(tmp_path, embedder):
    catalog, index = Catalog(tmp_path / "c.duckdb"), SubchunkIndex(tmp_path / "lance")
    recipe = SubchunkRecipe(40, 48, 16)
    publish(catalog, index, embedder, recipe)
    table = rows(index)
    texts = catalog.document_texts(sorted({(r["doc_id"], r["doc_version"]) for r in table}))
    for r in table[:: max(1, len(table) // 12)]:
        title, text = texts[(r["doc_id"], r["doc_version"])]
        chunk = text[r["char_start"]:r["char_end"]]
        assert chunk.strip() and not chunk.startswith(title + "\n")   # the stored range is the document's own text
        vector = np.asarray(r["vector"], dtype=np.float32)
        vector /= np.linalg.norm(vector)  # stored as int8, scaled so its largest component is 127
        titled, bare = embedder.encode([embedded_text(title, text, r["char_start"], r["char_end"]), chunk])
        assert float(vector @ titled) > 0.999 > float(vector @ bare)
    assert consistency.index_rows_match_catalog(catalog, index).passed


@pytest.mark.slow
def test_changing_the_recipe_re_cuts_every_unit_and_re_uses_the_vectors_of_unchanged_texts(tmp_path, embedder):
    catalog, index = Catalog(tmp_path / "c.duckdb"), SubchunkIndex(tmp_path / "lance")
    coarse, fine = SubchunkRecipe(112, 128), SubchunkRecipe(56, 64)
    first = publish(catalog, index, embedder, coarse)
    assert (index.recipe, first.replaced_recipe) == (coarse.name, None)

    switched = publish(catalog, index, embedder, fine)
    assert switched.replaced_recipe == coarse.name and SubchunkIndex(tmp_path / "lance").recipe == fine.name
    assert switched.units_indexed == first.units_indexed          # every unit, not only the changed ones
    assert switched.subchunks > first.subchunks
    assert switched.reused > 0 and switched.embedded + switched.reused == switched.subchunks
    members = [m for entries in catalog.live_units().values() for *_, m in entries]
    texts = catalog.document_texts(sorted({(m.doc_id, m.doc_version) for m in members}))
    expected = {(m.doc_id, m.start + s.start, m.start + s.end) for m in members
                for s in fine.spans(texts[(m.doc_id, m.doc_version)][1][m.start:m.end], default_counter())}
    assert {(r["doc_id"], r["char_start"], r["char_end"]) for r in rows(index)} == expected
    assert consistency.index_rows_match_catalog(catalog, index).passed

    again = publish(catalog, index, embedder, fine)
    assert (again.replaced_recipe, again.embedded, again.units_indexed) == (None, 0, 0)


def test_an_index_from_before_the_recipe_was_recorded_reads_as_the_legacy_recipe(tmp_path):
    index = SubchunkIndex(tmp_path / "lance")
    assert index.recipe == SubchunkRecipe().name
    old = schema().with_metadata({"embedder": "minilm"})
    index.table = index.db.create_table("subchunks", schema=old, mode="overwrite")
    assert SubchunkIndex(tmp_path / "lance").recipe == LEGACY_RECIPE_NAME
