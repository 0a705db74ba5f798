"""The read side's core: who is asking, the read state of one snapshot, dense and lexical search, LongRAG, packing.

Reads published snapshots only, never the writer's catalog. May import `rag.store` and the layers below it.
"""
