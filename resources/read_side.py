from __future__ import annotations

from dagster import ConfigurableResource

from rag.workspace import Workspace
from resources.embedder import EmbedderResource


class ReadSideResource(ConfigurableResource):
    """The workspace's published snapshots, for jobs that only read: it never takes the writer's lock."""

    workspace: str
    lance_uri: str

    def open(self, embedder: EmbedderResource) -> Workspace:
        return Workspace(self.workspace, lance_uri=self.lance_uri, embedder=embedder.embedder(),
                         counter=embedder.counter())
