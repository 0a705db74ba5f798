"""What the sources hold: documents, loaders (front matter, JSONL), version order, change scans, partitions.

Reads files, never a store. May import `rag.text` and `rag.models`.
"""
