"""Who is asking: callers and their groups, and the users file that names them."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
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


class CallerError(ValueError):
    """Nothing says who is asking; the message is one line."""


class UnknownUser(CallerError):
    """A user the users file does not name."""


def resolve_caller(*, groups: str | Iterable[str] | None = None, user: str | None = None,
                   users: Mapping[str, Caller] | None = None, users_file: str | Path | None = None) -> Caller:
    """Who is asking: the groups named (comma-separated or a list), else the user through the users mapping or
    file. The CLI, the server, the ask job and the evaluation all resolve callers here; there is no superuser."""
    if groups is not None:
        names = frozenset(g.strip() for g in (groups.split(",") if isinstance(groups, str) else groups) if g.strip())
        if not names:
            raise CallerError("no group named")
        return Caller(names)
    if not user:
        raise CallerError("name the asking user or their groups")
    if users is None:
        if users_file is None:
            raise CallerError(f"user '{user}' needs a users file to know their groups")
        users = load_users(users_file)
    if user not in users:
        raise UnknownUser(f"{users_file}: no user '{user}'" if users_file else f"unknown user '{user}'")
    return users[user]


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
