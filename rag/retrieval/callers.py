"""Who is asking: callers and their groups, and the users file that names them."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class Caller:
    """Who is asking: the groups they belong to. There is no implicit superuser."""

    groups: frozenset[str]

    def __post_init__(self):
        if not self.groups:
            raise ValueError("a caller needs at least one group")

    def may_read(self, acl: tuple[str, ...] | list[str]) -> bool:
        return not self.groups.isdisjoint(acl)


class UsersFileError(ValueError):
    """The users file cannot be used; the message is one line naming the file."""


def load_users(path: str | Path) -> dict[str, Caller]:
    """A YAML mapping of user name → list of group names; anything else is refused with one line."""
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as err:
        raise UsersFileError(f"{path}: cannot read users file ({err.strerror or err.__class__.__name__})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise UsersFileError(f"{path}: users file is not valid YAML ({err.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise UsersFileError(f"{path}: users file must map user names to lists of groups, "
                             f"not a {type(data).__name__}")
    users = {}
    for user, groups in data.items():
        if not isinstance(groups, list) or not groups or not all(isinstance(g, str) and g.strip() for g in groups):
            raise UsersFileError(f"{path}: user '{user}' must have a non-empty list of group names")
        users[str(user)] = Caller(frozenset(g.strip() for g in groups))
    return users
