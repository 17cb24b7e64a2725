"""The reduce: transmissions matched across capture points, clock offsets,
one-way delays, loss between capture points (``between_captures`` of
``metaroce-analyze report``), the fabric views and the culprits' sums,
all computed by the engine (the ``metaroce`` package, python/). Spark
moves a few large values; no matching rule and no per-packet row is
handled here.

0. :func:`load_engine`: a task per core loads the engine (checked
   against the driver's) in the Python worker the reduce's tasks reuse,
   warms it and pyarrow's Parquet reader up, and makes the worker's
   settings (worker_process.py: no zip re-read per task, freed memory
   kept, the heap a bucket needs reserved).
1. :func:`read_hosts`: tasks of several hosts each read a host's
   ``packets`` columns the engine needs (pyarrow) and ``metaroce.shard``
   cuts its sightings into buckets by a 64-bit hash of the transmission
   key: one compact blob per (host, bucket), LZ4-compressed. Every
   bucket also receives each host's info (row count, span, ``captures``
   row: small), and bucket 0 its stalls. Spark moves them to one partition per bucket:
   every sighting of a transmission, whatever its host, lands in the
   same one.
2. :func:`match_buckets` (the job that computes step 1): per bucket, the
   task decides from the infos which hosts are analysed, as the driver
   does after it, and ``metaroce.match_paths`` runs the engine's matcher
   once (sorting by capture time inside); it returns each path's sums of
   ``ts_b - ts_a`` and keeps the bucket as matched in a file of its
   executor. The sums, summed on the driver (``metaroce.merge_paths``),
   give the clock offsets (``metaroce.offsets``).
3. :func:`partials`: per bucket, ``metaroce.match_partials`` reads the
   kept matches knowing the offsets, the reference clock and the
   incidents' windows, and returns mergeable partials (delay histogram
   counts, fate counts, per-path, per-switch and per-incident sums);
   ``metaroce.assemble`` on the driver turns them into the report.

A task that fails is retried from its input (the shuffled values, which
Spark keeps; a bucket not kept on the executor that runs its second
pass is matched again there); only the result of its successful
attempt reaches the driver.
"""

import os
import socket
import uuid

from pyspark import TaskContext

from . import tables, worker_process

# The engine's MergeConfig default.
WINDOW_NS = 1_000_000_000

# The packets table's columns the reduce reads, as the engine takes them.
INT_COLUMNS = ["src_port", "src_conn", "dst_conn", "dest_qp", "type_code", "psn", "tx_ts", "ev", "path_seq",
               "ts_ns", "frame", "ecn", "stall_elapsed_ns"]
STRING_COLUMNS = ["proto", "src", "dst", "type"]
LIST_COLUMNS = ["hop_switch_id", "hop_queue_depth", "hop_latency_ns"]


def _engine(driver_version):
    """The executor's ``metaroce`` module, checked against the driver's
    engine: a mixed deployment fails naming the executor. Also makes this
    Python worker's settings for the reduce (worker_process)."""
    import metaroce

    worker_process.install()

    if metaroce.engine_version() != driver_version:
        raise RuntimeError(
            f"executor {socket.gethostname()} runs the metaroce engine {metaroce.engine_version()}, "
            f"the driver {driver_version}: ship one wheel to every node (cluster/README.md)"
        )
    return metaroce


def _warm_up(metaroce):
    """One packet row written to Parquet in memory, read back and sharded
    as a host's are: the reader's and the engine's first call in a
    process costs a few tenths of a second (code paths and thread pools
    set up), which the first host of each task would pay."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {c: ["metaroce" if c == "proto" else "10.0.0.1" if c in ("src", "dst") else "DATA"]
           for c in STRING_COLUMNS}
    row.update({c: [1] for c in INT_COLUMNS}, malformed=[False], **{c: [[1]] for c in LIST_COLUMNS})
    buffer = io.BytesIO()
    pq.write_table(pa.table(row), buffer)
    buffer.seek(0)
    table = _packets(pq.ParquetFile(buffer, read_dictionary=STRING_COLUMNS).read())
    metaroce.shard(table.to_batches(), 0, 1)


def load_engine(spark, driver_version, heap_bytes):
    """A task per core imports the engine (checked against the driver's),
    warms pyarrow's Parquet reader and the engine up and reserves
    ``heap_bytes`` of heap (:func:`heap_per_task`), so the reduce's first
    tasks start on Python workers that hold them; the tasks' small
    values then take the reduce's path through Spark (``partitionBy``, a
    task per partition reading them), whose first use in a JVM sets up
    its shuffle and compiles its code."""
    n = spark.sparkContext.defaultParallelism

    def load(_):
        _warm_up(_engine(driver_version))
        worker_process.reserve_heap(heap_bytes)
        return [(b, bytes(4096)) for b in range(n)]

    def drain(_, values):
        _engine(driver_version)
        yield sum(len(v) for _, v in values)

    spark.sparkContext.parallelize(range(n), n).flatMap(load).partitionBy(n, lambda b: b) \
        .mapPartitionsWithIndex(drain).collect()


def _fail_first_attempt():
    """Fault injection for the tests (METAROCE_TEST_FAIL_FIRST_ATTEMPT on
    the executors): partition 0's first attempt fails after its work."""
    ctx = TaskContext.get()
    if os.environ.get("METAROCE_TEST_FAIL_FIRST_ATTEMPT") and ctx and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
        raise RuntimeError("metaroce test: partition 0 fails on its first attempt (it is retried)")


def _files(path):
    """``(filesystem, [parquet files])`` under a local or remote directory."""
    import pyarrow.fs as pafs

    fs, root = tables.filesystem(path)
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
    return fs, sorted(i.path for i in infos if i.is_file and i.path.endswith(".parquet"))


def _read(path, columns, problems, dictionaries=()):
    """The rows of every readable Parquet file under ``path``, only
    ``columns`` of them (those the file has; all with None), the columns
    ``dictionaries`` as dictionaries (no string per row): a file that
    cannot be read is named in ``problems`` and skipped."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if path is None:
        return None
    fs, files = _files(path)
    tables = []
    for f in files:
        try:
            with fs.open_input_file(f) as source:
                pf = pq.ParquetFile(source, read_dictionary=list(dictionaries))
                names = pf.schema_arrow.names
                t = pf.read(columns=None if columns is None else [c for c in columns if c in names])
            tables.append(t)
        except Exception as e:  # noqa: BLE001 -- any unreadable file is reported, not fatal
            problems.append(f"{f}: unreadable ({type(e).__name__}: {e}): skipped")
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive")


def _packets(table):
    """The packets table with the columns and types the engine takes."""
    import pyarrow as pa

    fields = ([pa.field(c, pa.string()) for c in STRING_COLUMNS] + [pa.field("malformed", pa.bool_())]
              + [pa.field(c, pa.int64()) for c in INT_COLUMNS]
              + [pa.field(c, pa.list_(pa.int64())) for c in LIST_COLUMNS])
    n = table.num_rows

    def typed(f):
        if f.name not in table.column_names:
            return pa.nulls(n, f.type)
        column = table.column(f.name)
        t = column.type
        if f.type == pa.string() and (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)
                                      or (pa.types.is_dictionary(t) and t.index_type == pa.int32()
                                          and t.value_type == pa.string())):
            # The engine reads these string layouts as they are: no copy.
            return column
        return column.cast(f.type)

    return pa.table({f.name: typed(f) for f in fields})


# Packet rows per bucket at most, by default: a bucket's sightings are
# matched in one task's memory.
ROWS_PER_BUCKET = 4_000_000
# A bucket's pass 1 peaks at about this many bytes of heap per packet row
# (its blobs, their rows decoded and sorted, the matcher's window, the
# kept match encoded: the workers' peak resident memory at 16x150 and
# 32x150, less what the imports hold).
HEAP_PER_ROW = 240
# At most this much heap reserved per worker: glibc maps a larger block
# on its own (worker_process), and gives it back when freed.
HEAP_RESERVED_AT_MOST = 960 << 20


def packet_rows(items):
    """The hosts' packet rows, from their Parquet footers. Unreadable
    files count nothing here: their hosts' tasks name them."""
    import pyarrow.parquet as pq

    rows = 0
    for _, packets_dir, _ in items:
        if packets_dir is None:
            continue
        try:
            fs, files = _files(packets_dir)
            for f in files:
                with fs.open_input_file(f) as source:
                    rows += pq.ParquetFile(source).metadata.num_rows
        except Exception:  # noqa: BLE001 -- counted by the host's task, which names the problem
            continue
    return rows


def default_buckets(rows, cores):
    """One bucket per core (each pass then runs in one wave), more when
    the hosts' ``rows`` exceed ``ROWS_PER_BUCKET`` per bucket."""
    return max(1, cores, -(-rows // ROWS_PER_BUCKET))


def heap_per_task(rows, buckets):
    """The heap a Python worker reserves (:func:`load_engine`) for a
    bucket of ``rows`` packet rows in all of ``buckets``."""
    return min(HEAP_RESERVED_AT_MOST, -(-rows // max(1, buckets)) * HEAP_PER_ROW)


def read_hosts(spark, items, buckets, driver_version):
    """Tasks of several hosts ``items[i] = (host, packets dir, captures
    dir)`` (either dir may be None) read each host and cut its sightings
    into blobs; Spark moves them to one partition per bucket. Returns the
    RDD of ``(bucket, value)``, not yet computed (pass 1 runs it): a
    value is a blob, or a host's info ``{index, rows, first, last,
    captures, problems}``, which every bucket receives (pass 1 decides
    from them which hosts are analysed, without a job of its own), or
    ``(index, stalls)``, which bucket 0 receives."""
    columns = STRING_COLUMNS + ["malformed"] + INT_COLUMNS + LIST_COLUMNS

    def read(item):
        import pyarrow.compute as pc

        index, (host, packets_dir, captures_dir) = item
        metaroce = _engine(driver_version)
        problems = []
        info = {"index": index, "rows": 0, "first": None, "last": None, "captures": None, "problems": problems}
        caps = _read(captures_dir, None, problems)
        if caps is not None and caps.num_rows:
            info["captures"] = {k: v[0] for k, v in caps.slice(0, 1).to_pydict().items()}
        table = _read(packets_dir, columns, problems, dictionaries=STRING_COLUMNS)
        blobs, stalls = [], []
        if table is not None and table.num_rows:
            table = _packets(table)
            batches = table.to_batches()
            info["rows"] = table.num_rows
            mm = pc.min_max(table.column("ts_ns")).as_py()
            info["first"], info["last"] = mm["min"], mm["max"]
            stalls = metaroce.stalls(batches)
            blobs = metaroce.shard(batches, index, buckets)
        return [(b, info) for b in range(buckets)] + [(0, (index, stalls))] + blobs

    sc = spark.sparkContext
    # A task per core, each reading its share of the hosts: a task costs
    # more than a small host.
    tasks = max(1, min(len(items), sc.defaultParallelism))
    return sc.parallelize(list(enumerate(items)), tasks).flatMap(read).partitionBy(buckets, lambda b: b)


def _kept_path(job, bucket):
    """Where an executor keeps a bucket as matched between the two passes:
    in its directory of the application's files, which Spark removes when
    the application ends (``job``: this run's token)."""
    from pyspark import SparkFiles

    return os.path.join(SparkFiles.getRootDirectory(), f"metaroce-kept-{job}-{bucket}")


def _split(values):
    """A bucket's values: ``(blobs, infos in host order, stalls)``."""
    blobs, infos, stalls = [], [], []
    for v in values:
        if isinstance(v, bytes):
            blobs.append(v)
        elif isinstance(v, dict):
            infos.append(v)
        else:
            stalls.append(v)
    return blobs, sorted(infos, key=lambda i: i["index"]), sorted(stalls)


def match_buckets(blobs, analysed, driver_version, window_ns=WINDOW_NS, rows=False):
    """Pass 1: the engine's matcher over each bucket. Each task decides
    from the hosts' infos which hosts are analysed (``analysed(infos) ->
    (spans, remap)``, the function the driver runs on the same infos),
    keeps its bucket as matched in a file of its executor for pass 2
    (what pass 2 reads of it; with ``rows``, every row, for the
    per-transmission tables) and returns the bucket's paths' sums.
    Returns ``(paths, job, infos, stalls)``: the sums summed (bytes, for
    ``metaroce.offsets`` and pass 2), the token that names the kept
    files, the hosts' infos and their stalls ``[(index, stalls)]``."""
    job = uuid.uuid4().hex

    def run(i, it):
        parts, infos, stalls = _split(v for _, v in it)
        metaroce = _engine(driver_version)
        spans, remap = analysed(infos)
        # The engine writes the file whole, then renames it: a reader sees
        # all of it or nothing.
        paths, _ = metaroce.match_paths(parts, spans, remap, window_ns=window_ns, kept_file=_kept_path(job, i),
                                        rows=rows)
        yield paths, (infos, stalls) if i == 0 else None

    import metaroce

    done = blobs.mapPartitionsWithIndex(run).collect()
    infos, stalls = done[0][1]
    return metaroce.merge_paths([paths for paths, _ in done]), job, infos, stalls


def partials(blobs, job, spans, remap, paths, to_ref, windows, driver_version, window_ns=WINDOW_NS, tables_dir=None):
    """Pass 2: every bucket's partials (bytes, for ``metaroce.assemble``),
    from the bucket pass 1 kept on this executor; a task that runs
    elsewhere, or again, matches its bucket anew from the shuffled blobs
    (the same matches: the engine is deterministic). With ``tables_dir``
    (``--tables``), each task also writes its bucket's per-transmission
    tables there (``metaroce.match_tables``, tables.py)."""
    shared = blobs.context.broadcast(paths)

    def run(i, it):
        metaroce = _engine(driver_version)
        path = _kept_path(job, i)
        kept = path
        if not os.path.exists(path):
            parts, _, _ = _split(v for _, v in it)
            _, kept = metaroce.match_paths(parts, spans, remap, window_ns=window_ns, rows=tables_dir is not None)
        out = metaroce.match_partials(kept, spans, shared.value, to_ref, windows)
        if tables_dir is not None:
            tables.write_parts(tables_dir, i, metaroce.match_tables(kept, spans, shared.value, to_ref))
        if os.path.exists(path):
            os.remove(path)
        _fail_first_attempt()
        yield out

    return blobs.mapPartitionsWithIndex(run).collect()
