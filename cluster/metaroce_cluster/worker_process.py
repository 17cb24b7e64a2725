"""The settings of a Python worker that runs the reduce's tasks, made
once per worker process by :func:`install` (the first task that loads
the engine pays for the rest: Spark reuses a worker for many tasks).

- **Zip archives are not re-read at each task.** Before every task,
  PySpark's worker calls ``importlib.invalidate_caches()``. On Python 3.10
  and 3.11 that makes each ``zipimporter`` on ``sys.path`` read its
  archive's whole directory again, in pure Python; ``pyspark.zip`` alone
  has more than a thousand entries: about 0.2 s of every task on a small
  machine, on every core, in every stage. Python 3.12 made the
  invalidation lazy (CPython gh-103200). Here an archive is read again
  only when its size or modification time changed since this process
  last read it.
- **Freed memory stays in the process.** A task allocates and frees
  buffers of tens of megabytes (a bucket's sightings, its kept match).
  glibc hands each such buffer back to the kernel when it is freed, so
  the next task faults every page in again, and on a virtual machine a
  fresh page costs microseconds: hundreds of thousands of faults per
  pass. With glibc's mmap and trim thresholds raised, a freed buffer is
  reused by the next allocation. The worker keeps its peak heap until it
  exits, which Spark's workers do with the application.
- **The heap a bucket needs is reserved up front** (:func:`reserve_heap`,
  by the job's first tasks, part of its fixed cost). A worker's heap
  grows to its peak at its first hosts and buckets, each new page a
  fault; a long job's workers then reuse it for hundreds of hosts. The
  first task touches that peak once, as such a worker would have.
- **The garbage collector skips what the imports made.** A task makes
  few objects, but each collection of the oldest generation walks every
  object alive, modules included (PySpark, pyarrow, numpy): they are
  moved out of its sight (``gc.freeze``).
"""

import ctypes
import gc
import os
import sys
import zipimport

_read_stamps = {}
_installed = False
_reserved = 0

# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def _stamp(archive):
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _skip_unchanged_zips():
    if sys.version_info >= (3, 12):
        return
    reread = zipimport.zipimporter.invalidate_caches

    def invalidate_caches(self):
        stamp = _stamp(self.archive)
        if stamp is None or _read_stamps.get(self.archive) != stamp:
            reread(self)
            _read_stamps[self.archive] = stamp

    zipimport.zipimporter.invalidate_caches = invalidate_caches
    # The archives on the path were read by this task's start.
    for finder in list(sys.path_importer_cache.values()):
        if isinstance(finder, zipimport.zipimporter):
            _read_stamps[finder.archive] = _stamp(finder.archive)


def _keep_freed_memory():
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # not glibc: its allocator keeps its own policy
    mallopt(_M_MMAP_THRESHOLD, 1 << 30)
    mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)


def install():
    """Makes these settings in this process (once)."""
    global _installed
    if _installed:
        return
    _installed = True
    _skip_unchanged_zips()
    _keep_freed_memory()
    gc.freeze()


def reserve_heap(size):
    """Grows this process's heap to ``size`` bytes at least, every page
    touched, and frees it: with the settings of :func:`install`, glibc
    keeps it for the allocations that follow, which then fault no page
    in. Once per process and size. A worker whose memory is capped below
    it (``spark.executor.pyspark.memory``) reserves nothing: the tasks
    then grow the heap as they go."""
    global _reserved
    install()
    if size <= _reserved:
        return
    try:
        # A bytearray's memory is set to zero, which writes every page.
        block = bytearray(size)
    except MemoryError:
        return
    del block
    _reserved = size
