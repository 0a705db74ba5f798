"""Everything written to disk: the catalog (the only owner of SQL), published snapshots, the LanceDB index, the
writer lock, the publishing steps and the storage figure.

May import the layers below it: `rag.text`, `rag.models`, `rag.sources`, `rag.units`.
"""
