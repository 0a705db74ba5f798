"""A published file damaged the ways disks, copies and people damage it, for the store-damage tests."""
import json
from pathlib import Path

DAMAGES = ("deleted", "truncated", "garbage", "emptied")
WRONG_SHAPE = "wrong shape"   # for JSON files: valid JSON that is not what was written
GARBAGE = b"\x00\xff\xfe not what was written \xc3\x28" * 20   # a NUL and invalid UTF-8: no format reads it


def damage(path: Path, how: str) -> None:
    if how == "deleted":
        path.unlink()
    elif how == "truncated":
        path.write_bytes(path.read_bytes()[:path.stat().st_size // 2])
    elif how == "garbage":
        path.write_bytes(GARBAGE)
    elif how == "emptied":
        path.write_bytes(b"")
    elif how == WRONG_SHAPE:
        path.write_text(json.dumps({"shape": [1, 2, 3]}))
    else:
        raise ValueError(f"no damage called {how!r}")
