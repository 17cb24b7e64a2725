"""``--tables``: DIR/tables/*, the per-transmission Parquet tables
(``matched``, ``lost``, ``transmissions``, ``hops``) and the report's
lists as tables (``fabric_hosts``, ``fabric_evs``, ``fabric_switches``,
``stalls``, ``incident_switches``, ``incident_paths``).

The per-transmission tables come from the reduce's pass 2
(``between.partials``): each bucket's task asks the engine for the
bucket's rows (``metaroce.match_tables``, read from the bucket as pass 1
matched it, as its partials are) and writes one Parquet part per table,
``<table>/part-<bucket>.parquet`` (:func:`write_parts`). No packet row
goes through Spark. The lists are the report's, written by the driver
(:func:`write`).
"""

import os
import posixpath
import uuid

from .inputs import is_remote

PER_TRANSMISSION = ("matched", "lost", "transmissions", "hops")


def filesystem(path):
    """``(filesystem, path in it)`` of a local or remote directory (the
    reduce's reads use it too)."""
    import pyarrow.fs as pafs

    if is_remote(path):
        return pafs.FileSystem.from_uri(path)
    return pafs.LocalFileSystem(), path


def prepare(out):
    """Empties (or makes) the per-transmission tables' directories under
    ``out``/tables before pass 2 writes its parts, so that no part of an
    earlier run stays; returns the directory to give pass 2 (a local one
    made absolute: the tasks may run elsewhere than the driver's working
    directory)."""
    root = posixpath.join(out, "tables")
    if not is_remote(root):
        root = os.path.abspath(root)
    fs, path = filesystem(root)
    for table in PER_TRANSMISSION:
        fs.create_dir(posixpath.join(path, table), recursive=True)
        fs.delete_dir_contents(posixpath.join(path, table))
    return root


def write_parts(root, bucket, batches):
    """A bucket's tables (``[(table, record batch)]``, as
    ``metaroce.match_tables`` returns them), one part each. A part is
    written under a hidden temporary name and renamed: an attempt that is
    retried, or run twice, replaces its bucket's part, never adds one, and
    a reader never sees half of it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    fs, path = filesystem(root)
    for table, batch in batches:
        part = posixpath.join(path, table, f"part-{bucket:05d}.parquet")
        tmp = posixpath.join(path, table, f".part-{bucket:05d}.{uuid.uuid4().hex}.tmp")
        with fs.open_output_stream(tmp) as f:
            pq.write_table(pa.Table.from_batches([batch]), f)
        fs.move(tmp, part)


def _rows_table(spark, rows, path):
    """A list of dicts as one Parquet table (pyarrow on the driver for a
    local DIR, Spark otherwise)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows)
    if is_remote(path):
        spark.createDataFrame(table.to_pandas()).write.mode("overwrite").parquet(path)
        return
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    pq.write_table(table, posixpath.join(path, "part-0.parquet"))


def write(spark, out, report, stalls):
    """Writes the report's lists as tables under ``out``/tables (module
    docstring)."""
    out = posixpath.join(out, "tables")
    fabric = report["fabric"]
    culprits = {"incident_switches": "culprit_switches", "incident_paths": "culprit_paths"}
    lists = {"fabric_hosts": fabric["hosts"], "fabric_evs": fabric["evs"], "fabric_switches": fabric["switches"],
             "stalls": stalls}
    for table, key in culprits.items():
        lists[table] = [{"incident": i["incident"], **r} for i in report["incidents"] for r in i[key]]
    for table, rows in lists.items():
        _rows_table(spark, rows, posixpath.join(out, table))
