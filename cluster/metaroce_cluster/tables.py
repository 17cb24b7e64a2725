"""``--tables``: DIR/tables/*, the per-transmission Parquet tables
(``matched``, ``lost``, ``transmissions``, ``hops``) and the report's
lists as tables (``fabric_hosts``, ``fabric_evs``, ``fabric_switches``,
``stalls``, ``incident_switches``, ``incident_paths``).

The report itself needs no per-transmission row (between.py); these
tables do, so they come from a second, row-by-row pass of the same
engine: the sightings partitioned by transmission key in Spark, ordered,
and matched by ``metaroce.Matcher`` (``mapInArrow``), offsets and fates by
``metaroce.Between``. It costs what moving every packet row through
Spark costs (cluster/README.md, Performance), hence opt-in.
"""

import posixpath

from pyspark.sql import functions as F

from . import inputs
from .between import WINDOW_NS, _engine, _fail_first_attempt

FLOW = ["rocev2", "src", "dst", "src_conn", "dst_conn"]
PATH = ["ca", "cb"] + FLOW + ["ev"]

MATCHED = (
    "rocev2 boolean, src string, dst string, src_conn long, dst_conn long, ptype long, psn long, "
    "tx_ts long, ev long, path_seq long, state string, ca int, cb int, ts_a long, ts_b long, "
    "frame_a long, frame_b long"
)
DELAYS = MATCHED + ", up int, down int, delta long, owd long, owd_bucket long"
JUDGED = MATCHED + ", fate string"


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



def _align(spark, to_ref):
    return F.broadcast(spark.createDataFrame(sorted(to_ref.items()) or [(-1, 0)], "capture int, to_ref long"))



def transmissions(spark, owd, counted_lost, paths_down, to_ref):
    """Every transmission that left an upstream capture, delivered or not,
    on the reference clock: ``up, down, flow, ev, t, owd (null when lost),
    lost, frame_down``."""
    align = _align(spark, to_ref)
    delivered = owd.select(
        "up", "down", "rocev2", "src", "dst", "src_conn", "dst_conn", "ev",
        F.when(F.col("up") == F.col("ca"), F.col("ts_a")).otherwise(F.col("ts_b")).alias("ts"),
        F.col("owd"),
        F.lit(False).alias("lost"),
        F.when(F.col("down") == F.col("ca"), F.col("frame_a")).otherwise(F.col("frame_b")).alias("frame_down"),
    )
    # A lost transmission's downstream capture is where its flow's other
    # packets arrived.
    lost = counted_lost.withColumnRenamed("capture", "up").join(
        F.broadcast(paths_down), ["up", "rocev2", "src", "dst", "src_conn", "dst_conn"], "left"
    ).select(
        "up", "down", "rocev2", "src", "dst", "src_conn", "dst_conn", "ev", "ts",
        F.lit(None).cast("long").alias("owd"), F.lit(True).alias("lost"), F.lit(None).cast("long").alias("frame_down"),
    )
    tx = delivered.unionByName(lost)
    return tx.join(align.withColumnRenamed("capture", "up"), "up", "left").withColumn(
        "t", F.col("ts") - F.coalesce(F.col("to_ref"), F.lit(0))
    ).drop("to_ref")


def hop_rows(tx, packets):
    """One row per (delivered transmission, switch it crossed)."""
    tel = packets.where(F.col("hop_switch_id").isNotNull()).select(
        F.col("capture").alias("down"), F.col("frame").alias("frame_down"),
        F.arrays_zip("hop_switch_id", "hop_queue_depth", "hop_latency_ns").alias("hops"),
    )
    return tx.where(~F.col("lost")).join(tel, ["down", "frame_down"]).select(
        "up", "down", "rocev2", "src", "dst", "src_conn", "dst_conn", "ev", "t",
        F.posexplode("hops").alias("hop", "h"),
    ).select(
        "*", F.col("h.hop_switch_id").cast("long").alias("switch_id"),
        F.col("h.hop_queue_depth").cast("long").alias("queue_depth"),
        F.col("h.hop_latency_ns").cast("long").alias("hop_latency_ns"),
    ).drop("h")



def _rows_table(spark, rows, path):
    """A list of dicts as one Parquet table (pyarrow on the driver for a
    local DIR, Spark otherwise)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(rows)
    if "://" in path:
        spark.createDataFrame(table.to_pandas()).write.mode("overwrite").parquet(path)
        return
    import os
    import shutil

    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    pq.write_table(table, posixpath.join(path, "part-0.parquet"))


def write(spark, args, roots, hosts_of_root, hosts, report, stalls, to_ref, version):
    """Writes DIR/tables/* (module docstring)."""
    out = posixpath.join(args.out, "tables")
    fs = inputs.Fs(spark)
    packets = inputs.read_table(spark, fs, roots, "packets", hosts_of_root)
    if packets is not None:
        index = spark.createDataFrame([(h["host"], h["capture"]) for h in hosts], "host string, capture int")
        packets = packets.join(F.broadcast(index), "host").withColumn("ts_ns", F.col("ts_ns").cast("long")).withColumn(
            "frame", F.col("frame").cast("long"))
        spans = [(h["first_ts_ns"] or 0, h["last_ts_ns"] or 0) for h in hosts]
        tx = match(sightings(packets), spans, version, args.window_ns).cache()
        matched = tx.where(F.col("state") == "matched")
        paths = path_sums(matched)
        owd = one_way_delays(matched, spans, paths, version).cache()
        lost = judge(tx.where(F.col("state") != "matched"), spans, paths, version).cache()
        paths_down = owd.select("up", "down", "rocev2", "src", "dst", "src_conn", "dst_conn").distinct()
        trans = transmissions(spark, owd, lost, paths_down, to_ref).cache()
        hops = hop_rows(trans, packets)
        for df, table in ((owd, "matched"), (lost, "lost"), (trans, "transmissions"), (hops, "hops")):
            df.write.mode("overwrite").parquet(posixpath.join(out, table))
        tx.unpersist()
    fabric = report["fabric"]
    culprits = {"incident_switches": "culprit_switches", "incident_paths": "culprit_paths"}
    lists = {"fabric_hosts": fabric["hosts"], "fabric_evs": fabric["evs"], "fabric_switches": fabric["switches"],
             "stalls": stalls}
    for table, key in culprits.items():
        lists[table] = [{"incident": i["incident"], **r} for i in report["incidents"] for r in i[key]]
    for table, rows in lists.items():
        _rows_table(spark, rows, posixpath.join(out, table))
