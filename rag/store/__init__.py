"""Everything written to disk: the catalog (the only owner of SQL), published snapshots, the LanceDB index, the
writer lock, the publishing steps and the storage figure.

May import the layers below it: `rag.text`, `rag.models`, `rag.sources`, `rag.units`. Importing it lets the
partition planning of `rag.sources` read and write the bucket's copy of its files (rag.store.bucket_view).
"""
from rag.sources import partitions as _partitions
from rag.store.bucket_view import BucketView as _BucketView

if not any(isinstance(m, _BucketView) for m in _partitions.MIRRORS):
    _partitions.MIRRORS.append(_BucketView())
