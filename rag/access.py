"""Read-time access: what a caller may read now (or as of a time), straight from the catalog."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rag.catalog import Catalog
from rag.documents import Document


@dataclass(frozen=True)
class Caller:
    """Who is asking: the groups they belong to. There is no implicit superuser."""

    groups: frozenset[str]

    def __post_init__(self):
        if not self.groups:
            raise ValueError("a caller needs at least one group")

    def may_read(self, acl: tuple[str, ...] | list[str]) -> bool:
        return not self.groups.isdisjoint(acl)


def readable_documents(catalog: Catalog, caller: Caller, as_of: datetime | None = None) -> list[Document]:
    """Current (or then-current) document versions whose ACL admits one of the caller's groups."""
    if as_of is None:
        where, params = "status = 'current'", []
    else:
        where = "valid_from <= ? AND (valid_to IS NULL OR valid_to > ?)"
        params = [as_of, as_of]
    return catalog.documents_where(f"{where} AND list_has_any(acl, ?)", [*params, sorted(caller.groups)])
