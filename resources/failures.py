"""Errors whose one-line message is the whole story, raised in a run as Dagster's Failure: the UI shows the line
itself first, not a wrapped error under a stack trace."""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg

from rag.sources.partitions import PartitionError


@contextmanager
def one_line_failure(errors: tuple[type[Exception], ...] = (PartitionError,)) -> Iterator[None]:
    """Re-raise `errors` (a partition key or layout refused, by default) as a Failure that is not retried."""
    try:
        yield
    except errors as err:
        raise dg.Failure(description=str(err), allow_retries=False) from None
