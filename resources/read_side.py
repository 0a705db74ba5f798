from __future__ import annotations

from dagster import ConfigurableResource

from rag.models.embedders import workspace_embedder_name
from rag.query.workspace import Workspace
from resources.embedder import EmbedderResource


class ReadSideResource(ConfigurableResource):
    """The workspace's published snapshots, for jobs that only read: it never takes the writer's lock."""

    workspace: str
    lance_uri: str

    def open(self, embedder: EmbedderResource) -> Workspace:
        """The read side, with questions embedded in the space the workspace's index holds."""
        ws = Workspace(self.workspace, lance_uri=self.lance_uri, counter=embedder.counter())
        ws.use_embedder(embedder.embedder(workspace_embedder_name(ws.snapshot().catalog)))
        return ws
