"""File-system groups (`--acl-from posix`): the groups that may read a file, from its mode bits and POSIX ACL."""
from __future__ import annotations

import errno
import grp
import os
import stat
import struct
from pathlib import Path

from rag.sources.documents import InputError

ACL_FROM = ("", "posix", "posix,everyone")
EVERYONE = "everyone"
_XATTR = "system.posix_acl_access"
_GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x04, 0x08, 0x10, 0x20
_READ = 4
_NO_ACL = (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP)


def file_groups(path: Path, everyone: bool) -> tuple[str, ...]:
    """The owning group if it may read the file, its POSIX ACL's groups that may, and `everyone` (when asked) if
    the world may; a one-line InputError if the file's permissions cannot be read."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError as err:
        raise InputError(f"cannot read its permissions: {err.strerror}") from None
    entries = _posix_acl(path)
    if entries is None:
        groups = {_name(st.st_gid)} if st.st_mode & stat.S_IRGRP else set()
        world = bool(st.st_mode & stat.S_IROTH)
    else:   # with an ACL the mask bounds the owning group and every named group
        mask = next((perm for tag, perm, _ in entries if tag == _MASK), 7)
        groups = {_name(st.st_gid) for tag, perm, _ in entries if tag == _GROUP_OBJ and perm & mask & _READ}
        groups |= {_name(gid) for tag, perm, gid in entries if tag == _GROUP and perm & mask & _READ}
        world = any(tag == _OTHER and perm & _READ for tag, perm, _ in entries)
    return tuple(sorted(groups | ({EVERYONE} if everyone and world else set())))


def _posix_acl(path: Path) -> list[tuple[int, int, int]] | None:
    """The access ACL's (tag, permissions, id) entries; None without one (or on a file system without ACLs)."""
    try:
        raw = os.getxattr(path, _XATTR, follow_symlinks=False)
    except OSError as err:
        if err.errno in _NO_ACL:
            return None
        raise InputError(f"cannot read its POSIX ACL: {err.strerror}") from None
    if len(raw) < 4 or (len(raw) - 4) % 8 or struct.unpack_from("<I", raw)[0] != 2:
        raise InputError("its POSIX ACL is in an unknown format")
    return list(struct.iter_unpack("<HHI", raw[4:]))


def _name(gid: int) -> str:
    """A group's name; its number when the system does not know it (it matches no named group of a caller)."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
