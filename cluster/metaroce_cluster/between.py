"""Transmissions matched across capture points, clock offsets, one-way
delays and loss between capture points: ``between_captures`` of
``metaroce-analyze report``, computed by the engine itself (the
``metaroce`` package, python/) over Spark partitions. No matching rule is
stated here: Spark partitions, orders and sums; the engine decides.

1. :func:`match`: every host's sightings are partitioned by transmission
   key and ordered by capture time in each partition; a ``metaroce.Matcher``
   per partition (``mapInArrow``) runs the engine's matcher (the key,
   duplicates, RoCEv2 retransmissions, the window) and returns one row per
   transmission: ``matched`` (both copies), ``left`` (it left the window
   unmatched and counts as lost) or ``waiting`` (unmatched at the end).
2. :func:`path_sums`: Spark sums the matches per path (count, min, max and
   sum of ``ts_b - ts_a``); from those a ``metaroce.Between`` on each
   executor estimates the clock offsets as the engine does, gives every
   matched row its one-way delay and histogram bucket
   (:func:`one_way_delays`) and judges the transmissions still waiting at
   the end (:func:`judge`).
3. :func:`between_captures`: Spark counts rows per (path, delay bucket)
   and per (path, fate); ``Between.report`` turns those counts into the
   engine's ``between_captures``: percentiles from bucket counts are the
   percentiles of all samples.

Only sums and counts per path reach the driver; a task that fails and is
retried recomputes its partition from its input, and only its successful
attempt's rows reach the sums.
"""

import json
import os
import socket

from pyspark import TaskContext
from pyspark.sql import functions as F

# The engine's MergeConfig default.
WINDOW_NS = 1_000_000_000

FLOW = ["rocev2", "src", "dst", "src_conn", "dst_conn"]
PATH = ["ca", "cb"] + FLOW + ["ev"]

MATCHED = (
    "rocev2 boolean, src string, dst string, src_conn long, dst_conn long, ptype long, psn long, "
    "tx_ts long, ev long, path_seq long, state string, ca int, cb int, ts_a long, ts_b long, "
    "frame_a long, frame_b long"
)
DELAYS = MATCHED + ", up int, down int, delta long, owd long, owd_bucket long"
JUDGED = MATCHED + ", fate string"


def _engine(driver_version):
    """The executor's ``metaroce`` module, checked against the driver's
    engine: a mixed deployment fails naming the executor."""
    import metaroce

    if metaroce.engine_version() != driver_version:
        raise RuntimeError(
            f"executor {socket.gethostname()} runs the metaroce engine {metaroce.engine_version()}, "
            f"the driver {driver_version}: ship one wheel to every node (cluster/README.md)"
        )
    return metaroce


def _fail_first_attempt():
    """Fault injection for the tests (METAROCE_TEST_FAIL_FIRST_ATTEMPT on
    the executors): partition 0's first attempt fails after its work."""
    ctx = TaskContext.get()
    if os.environ.get("METAROCE_TEST_FAIL_FIRST_ATTEMPT") and ctx and ctx.partitionId() == 0 and ctx.attemptNumber() == 0:
        raise RuntimeError("metaroce test: partition 0 fails on its first attempt (it is retried)")


def sightings(packets):
    """The columns the matcher reads of every MetaRoCE and RoCEv2 row (which
    of them are transmissions is the engine's rule): ``packets`` has the
    export's columns plus ``capture`` (the host's index)."""
    rocev2 = F.col("proto") == "rocev2"
    return packets.where(F.col("proto").isin("metaroce", "rocev2")).select(
        rocev2.alias("rocev2"),
        F.col("malformed"),
        "src",
        "dst",
        F.when(rocev2, F.lit(0)).otherwise(F.col("src_conn")).cast("long").alias("src_conn"),
        F.when(rocev2, F.col("dest_qp")).otherwise(F.col("dst_conn")).cast("long").alias("dst_conn"),
        F.col("type_code").cast("long").alias("type_code"),
        F.col("psn").cast("long").alias("psn"),
        F.coalesce(F.col("tx_ts"), F.lit(0)).cast("long").alias("tx_ts"),
        F.when(rocev2, F.col("src_port")).otherwise(F.col("ev")).cast("long").alias("ev"),
        F.coalesce(F.col("path_seq"), F.lit(0)).cast("long").alias("path_seq"),
        F.col("ts_ns").cast("long").alias("ts"),
        F.col("capture").cast("int").alias("capture"),
        F.col("frame").cast("long").alias("frame"),
        F.col("ecn").cast("long").alias("ecn"),
    )


def match(sight, spans, driver_version, window_ns=WINDOW_NS, partitions=None):
    """The engine's matcher over partitions of the sightings: one row per
    transmission (``MATCHED`` schema: ``state`` matched/left/waiting; ``ca
    < cb`` the captures of a match, ``ca`` the only one otherwise).
    ``spans[c]``: capture c's ``(first_ts_ns, last_ts_ns)``."""
    key = ["rocev2", "src", "dst", "src_conn", "dst_conn", "type_code", "psn", "tx_ts", "ev", "path_seq"]
    parted = sight.repartition(partitions, *key) if partitions else sight.repartition(*key)
    ordered = parted.sortWithinPartitions("ts", "capture", "frame")

    def run(batches):
        metaroce = _engine(driver_version)
        matcher = metaroce.Matcher(spans, window_ns=window_ns)
        for batch in batches:
            out = matcher.observe(batch)
            if out.num_rows:
                yield out
        _fail_first_attempt()
        yield matcher.finish()

    return ordered.mapInArrow(run, MATCHED)


def path_sums(matched):
    """Per path: ``n``, ``min``, ``max`` and ``sum`` (a decimal string) of
    ``ts_b - ts_a``, as the rows ``metaroce.Between`` takes."""
    delta = F.col("ts_b") - F.col("ts_a")
    sums = matched.groupBy(*PATH).agg(
        F.count("*").alias("n"),
        F.min(delta).alias("min"),
        F.max(delta).alias("max"),
        F.sum(delta.cast("decimal(38,0)")).cast("string").alias("sum"),
    )
    return [tuple(r) for r in sums.collect()]


def one_way_delays(matched, spans, paths, driver_version):
    """Matched rows with ``up``, ``down`` (captures), ``delta``, ``owd`` (the
    offset-corrected one-way delay) and ``owd_bucket``."""

    def run(batches):
        between = _engine(driver_version).Between(spans, paths)
        for batch in batches:
            yield between.one_way_delays(batch)

    return matched.mapInArrow(run, DELAYS)


def judge(unmatched, spans, paths, driver_version):
    """Unmatched rows judged by the engine (``fate`` lost/unknown); those
    that count in neither are left out. Columns renamed for the fabric
    views: ``capture``, ``ts``, ``frame``."""

    def run(batches):
        between = _engine(driver_version).Between(spans, paths)
        for batch in batches:
            yield between.judge(batch)

    return (
        unmatched.mapInArrow(run, JUDGED)
        .where(F.col("fate").isNotNull())
        .withColumnRenamed("ca", "capture")
        .withColumnRenamed("ts_a", "ts")
        .withColumnRenamed("frame_a", "frame")
        .drop("cb", "ts_b", "frame_b", "state")
    )


def between_captures(owd, judged, spans, paths):
    """The ``between_captures`` list of ``report --json``, from the counts
    per (path, delay bucket) and per (path, fate)."""
    import metaroce

    buckets = owd.groupBy(*PATH, "owd_bucket").agg(F.count("*").alias("n"))
    fates = judged.groupBy("capture", *FLOW, "ev", "fate").agg(F.count("*").alias("n"))
    report = metaroce.Between(spans, paths).report(
        [tuple(r) for r in buckets.collect()], [tuple(r) for r in fates.collect()]
    )
    return json.loads(report)
