"""An embedder chosen per workspace: recorded in the catalog, carried by the index, and a change re-embeds
everything so that no index ever holds (or is queried in) two vector spaces."""
import shutil

import dagster as dg
import numpy as np
import pytest
from conftest import SAMPLES

from rag.models.embedders import workspace_embedder_name
from rag.models.files import USE_FILES_SHA256, ModelIntegrityError, use_resources_dir, verified_use_dir
from rag.models.tokens import default_counter
from rag.retrieval.vectors import load_state
from rag.store.catalog import Catalog
from rag.store.index import SubchunkIndex
from rag.store.publish import publish_documents, publish_index, publish_units
from rag.store.row_units import Membership
from rag.store.settings import IngestSettings


def publish(catalog, index, embedder, source):
    settings = IngestSettings(sources=[str(source)], embedder=embedder.name)
    publish_documents(catalog, settings)
    publish_units(catalog, default_counter(), settings)
    return publish_index(catalog, index, embedder.encode, default_counter(), settings,
                         workspace_embedder_name(catalog, settings.embedder))


def vectors(index):
    data, stored = index.rows(["doc_id", "doc_version", "part", "char_start"])
    keys = zip(*(data.column(c).to_pylist() for c in data.column_names))
    return dict(zip(keys, stored.to_numpy(zero_copy_only=False)))


@pytest.mark.slow
def test_changing_the_embedder_re_embeds_every_sub_chunk_in_the_new_space_only(tmp_path, embedder, multilingual):
    catalog, index = Catalog(tmp_path / "c.duckdb"), SubchunkIndex(tmp_path / "lance")
    source = SAMPLES / "corpus-zh"
    first = publish(catalog, index, embedder, source)
    assert (first.embedder, first.replaced_embedder, index.dimension) == ("minilm", None, 384)
    assert catalog.setting("embedder") == "minilm"

    switched = publish(catalog, index, multilingual, source)
    assert switched.replaced_embedder == "minilm" and switched.embedder == "use-multilingual"
    assert switched.embedded == switched.subchunks == first.subchunks and switched.reused == 0
    assert (index.dimension, index.embedder, catalog.setting("embedder")) == (512, "use-multilingual",
                                                                              "use-multilingual")
    assert index.vectors.count_rows() == switched.embedded     # no MiniLM vector left to be re-used
    data, stored = index.rows(["doc_id", "char_start", "char_end"])
    rows = [dict(r, vector=v) for r, v in zip(data.to_pylist(), stored.to_pylist())]
    texts = catalog.document_texts([(r["doc_id"], "2026") for r in rows[:3]])
    for r in rows[:3]:
        title, text = texts[(r["doc_id"], "2026")]
        expected = multilingual.encode([f"{title}\n{text[r['char_start']:r['char_end']]}"])[0]
        stored = np.asarray(r["vector"], dtype=np.float32)  # int8: scaled so its largest component is 127
        assert float(np.dot(expected, stored / np.linalg.norm(stored))) > 0.99

    again = SubchunkIndex(tmp_path / "lance")                  # a later run that names no embedder keeps it
    assert workspace_embedder_name(catalog) == "use-multilingual" and again.embedder == "use-multilingual"
    with pytest.raises(ValueError, match="384 dimensions but the index holds 512"):
        load_state(again, membership=Membership.of(catalog.unit_membership())).scores(embedder.encode_query("缓存"), frozenset({"edge-ops"}))

    back = publish(catalog, index, embedder, source)
    assert back.replaced_embedder == "use-multilingual" and back.embedded == back.subchunks and back.reused == 0
    assert index.dimension == 384 and all(len(v) == 384 for v in vectors(index).values())


@pytest.mark.slow
def test_the_ingest_asset_says_when_it_re_embedded_for_another_embedder(tmp_path):
    from assets.ingest import ingest_assets
    from assets.ingest_metadata import FIRST_RUN, SAME_EMBEDDER
    from pipelines.workspace_resources import workspace_resources

    def ingest(name):
        settings = IngestSettings(workspace=tmp_path / "ws", sources=[SAMPLES / "corpus-zh"], embedder=name)
        result = dg.materialize(ingest_assets, resources=workspace_resources(settings))
        (event,) = [e for e in result.get_asset_materialization_events() if e.asset_key.path[-1] == "subchunk_index"]
        return {k: v.value for k, v in event.materialization.metadata.items()}

    first = ingest(None)
    assert (first["embedder"], first["embedder_replaced"]) == ("minilm", FIRST_RUN)
    switched = ingest("use-multilingual")
    assert (switched["embedder"], switched["embedder_replaced"]) == ("use-multilingual", "minilm")
    assert switched["embedded"] == switched["subchunks"] == first["subchunks"]
    kept = ingest(None)
    assert (kept["embedder"], kept["embedder_replaced"], kept["embedded"]) == ("use-multilingual", SAME_EMBEDDER, 0)


def test_unknown_embedders_are_refused_with_one_line(tmp_path):
    catalog = Catalog(tmp_path / "c.duckdb")
    with pytest.raises(ValueError, match="unknown embedder .bert.; expected one of minilm, minilm-int8, use-multilingual"):
        workspace_embedder_name(catalog, "bert")


def test_tampered_multilingual_weights_are_refused_naming_the_file(tmp_path):
    folder = tmp_path / "resources"
    shutil.copytree(use_resources_dir(), folder)
    assert verified_use_dir(folder) == folder
    (folder / "weights.npz").write_bytes(b"not the weights")
    verified_use_dir.cache_clear()
    with pytest.raises(ModelIntegrityError, match="refusing") as err:
        verified_use_dir(folder)
    assert str(folder / "weights.npz") in str(err.value) and set(USE_FILES_SHA256) == {"weights.npz", "sp.model"}
