"""Long units: links between documents, link components, grouping under a token cap, rendering, sub-chunk spans.

Pure functions over documents. May import `rag.text`, `rag.models` and `rag.sources`.
"""
