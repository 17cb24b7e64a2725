"""Task start without re-reading zip archives, on Python 3.10 and 3.11.

Before every task, PySpark's worker calls ``importlib.invalidate_caches()``
(new ``--py-files`` may have arrived). On Python 3.10 and 3.11 that makes
each ``zipimporter`` on ``sys.path`` read its archive's whole directory
again, in pure Python; ``pyspark.zip`` alone has more than a thousand
entries: about 0.2 s of every task on a small machine, on every core, in
every stage. Python 3.12 made the invalidation lazy (CPython gh-103200).

:func:`install` gives this worker process the same economy: an archive is
read again only when its size or modification time changed since this
process last read it. A worker runs many tasks (Spark reuses it), so the
first task that calls this (the reduce's engine load) pays for the rest.
"""

import os
import sys
import zipimport

_read_stamps = {}


def _stamp(archive):
    try:
        st = os.stat(archive)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def install():
    """Installs the check in this process (idempotent; nothing to do on
    Python 3.12 or later)."""
    if sys.version_info >= (3, 12) or getattr(zipimport.zipimporter.invalidate_caches, "_metaroce", False):
        return
    reread = zipimport.zipimporter.invalidate_caches

    def invalidate_caches(self):
        stamp = _stamp(self.archive)
        if stamp is None or _read_stamps.get(self.archive) != stamp:
            reread(self)
            _read_stamps[self.archive] = stamp

    invalidate_caches._metaroce = True
    zipimport.zipimporter.invalidate_caches = invalidate_caches
