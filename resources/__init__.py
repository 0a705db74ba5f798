"""Dagster resources: thin ConfigurableResource wrappers that hand out the `rag` core objects."""
from resources.catalog import CatalogResource
from resources.embedder import EmbedderResource
from resources.read_side import ReadSideResource
from resources.sources import SourceSettings
from resources.vector_store import VectorStoreResource

__all__ = ["CatalogResource", "EmbedderResource", "ReadSideResource", "SourceSettings", "VectorStoreResource"]
