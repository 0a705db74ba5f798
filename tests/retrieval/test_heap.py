"""A read-state build returns what it freed to the system: memory freed through glibc's heap or Arrow's pool leaves
the process's resident set once `release_free_memory` runs, and a build's large blocks as soon as they are freed,
instead of staying for the life of a serving process."""
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Small blocks (100 KB, below glibc's mmap threshold) land on the heap, and one block kept after them pins its top,
# so freeing them returns nothing by itself; Arrow's pool keeps what it freed for reuse.
CHILD = """
import sys
import numpy as np
import pyarrow as pa
from rag.retrieval.heap import release_free_memory

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

heap = [np.ones(100_000 // 8) for _ in range(1500)]
kept = heap[-1]
del heap
pool = [pa.allocate_buffer(100_000) for _ in range(1500)]
for b in pool:
    memoryview(b).cast("B")[:] = bytes(100_000)
del pool
freed = rss_mib()
if sys.argv[1] == "release":
    release_free_memory()
print(freed, rss_mib())
"""


def resident_mib(child: str, mode: str) -> tuple[float, float]:
    """The child's resident MiB once it holds the blocks, and once it freed them."""
    out = subprocess.run([sys.executable, "-c", child, mode], cwd=REPO, capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), float(out[1])


def test_freed_heap_and_pool_memory_leave_the_resident_set():
    freed, released = resident_mib(CHILD, "release")
    assert freed - released > 200  # of ~290 MiB freed, ~145 by each allocator: both must give theirs back


def test_without_the_release_the_freed_memory_stays_resident():
    freed, kept = resident_mib(CHILD, "keep")
    assert freed - kept < 50


# glibc's threshold at 32 MB, where its own sliding threshold ends once Lance's and Arrow's buffers are freed, so
# 1 MB blocks come from the heap, where a block kept after them holds the heap's top: freed, they stay resident until
# a trim, unless the build maps them apart
BUILD = """
import ctypes
import sys
import numpy as np
from rag.retrieval.heap import built

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

libc = ctypes.CDLL("libc.so.6")
libc.mallopt(-3, 32 * 2**20)  # M_MMAP_THRESHOLD
libc.mallopt(-1, 64 * 2**20)  # M_TRIM_THRESHOLD: twice it, as glibc's sliding threshold sets it
def build():
    blocks = [np.ones(2**20 // 8) for _ in range(200)]
    kept = np.ones(2**20 // 8)  # carved from the heap's top after them, as a build's kept result would be
    before = rss_mib()
    del blocks
    return before, kept
before, kept = built(build) if sys.argv[1] == "built" else build()
print(before, rss_mib())
"""


def test_a_builds_large_blocks_leave_the_resident_set_when_freed():
    held, after = resident_mib(BUILD, "built")
    assert held - after > 150  # of 200 MiB freed


def test_outside_a_build_the_same_blocks_stay_on_the_heap():
    held, after = resident_mib(BUILD, "plain")
    assert held - after < 50
