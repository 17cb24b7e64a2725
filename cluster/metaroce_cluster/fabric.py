"""Fabric views and the job-wide stall timeline.

Every time here is on one clock, the reference capture's (index 0): a
capture's times are moved by the offsets estimated between capture pairs,
chained along the pairs that exchanged traffic (a host whose clock cannot
be chained to the reference keeps its own, and is named in ``messages``).

- ``hosts``: per (upstream host, downstream host): transmissions and those
  that never reached the downstream capture (``lost``: the engine's
  ``lost_between`` and ``unknown`` together, see cluster/README.md), loss
  rate, one-way delay percentiles.
- ``evs``: the same per ev.
- ``switches``: per switch named by HOP_TELEMETRY (the downstream copy of
  each matched transmission carries the switches it crossed): hops, hop
  latency (the delay the switch added) and queue depth; and the loss of the
  paths that cross it (a path's switches are those its delivered packets
  named; a lost packet names none, so it is charged to every switch of its
  path).
- ``incidents``: stalls of all hosts (the engine's, from the ``packets``
  table) aligned on the reference clock and grouped while they overlap;
  per incident the hosts and connections that stalled and the switches and
  paths whose loss or delay rose in the incident's window compared to the
  rest of the job, ranked by ``score`` = the rise of the loss rate over the
  largest rise among candidates + the rise of the delay over the largest
  rise (each 0..1; both kinds of evidence count equally).
"""

from collections import deque

from pyspark.sql import Window
from pyspark.sql import functions as F


def reference_offsets(n_captures, offsets):
    """``{capture: clock of capture minus clock of the reference}`` for the
    captures chained to a reference by estimated offsets. Each connected
    group of captures takes its lowest index as reference."""
    edges = {}
    for (a, b), o in offsets.items():
        edges.setdefault(a, []).append((b, o))
        edges.setdefault(b, []).append((a, -o))
    to_ref, ref_of = {}, {}
    for start in range(n_captures):
        if start in to_ref:
            continue
        to_ref[start], ref_of[start] = 0, start
        todo = deque([start])
        while todo:
            c = todo.popleft()
            for other, o in sorted(edges.get(c, [])):
                if other not in to_ref:
                    to_ref[other] = to_ref[c] + o
                    ref_of[other] = start
                    todo.append(other)
    return to_ref, ref_of


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


PATH = ["up", "down", "rocev2", "src", "dst", "src_conn", "dst_conn", "ev"]


def path_switches(hops):
    """Switches each path crossed (as its delivered packets named them)."""
    return hops.groupBy(*PATH).agg(F.array_sort(F.collect_set("switch_id")).alias("switches"))


def _loss_delay(df, keys):
    return df.groupBy(*keys).agg(
        F.count("*").alias("transmissions"),
        F.sum(F.col("lost").cast("long")).alias("lost"),
        F.percentile_approx("owd", [0.5, 0.99], 10000).alias("owd"),
        F.max("owd").alias("owd_max"),
    ).select(
        *keys, "transmissions", "lost",
        (F.col("lost") / F.col("transmissions")).alias("loss_rate"),
        F.col("owd")[0].alias("owd_p50_ns"), F.col("owd")[1].alias("owd_p99_ns"), F.col("owd_max").alias("owd_max_ns"),
    )


def views(tx, hops, switches_of_path, host_name):
    """The three fabric views as DataFrames (host names filled in)."""
    names = F.broadcast(host_name)
    hosts = (
        _loss_delay(tx, ["up", "down"])
        .join(names.withColumnRenamed("capture", "up").withColumnRenamed("host", "src_host"), "up", "left")
        .join(names.withColumnRenamed("capture", "down").withColumnRenamed("host", "dst_host"), "down", "left")
    )
    evs = _loss_delay(tx, ["ev"])
    sw_delay = hops.groupBy("switch_id").agg(
        F.count("*").alias("hops"),
        F.avg("hop_latency_ns").alias("hop_latency_mean_ns"),
        F.percentile_approx("hop_latency_ns", [0.5, 0.99], 10000).alias("lat"),
        F.max("hop_latency_ns").alias("hop_latency_max_ns"),
        F.max("queue_depth").alias("queue_depth_max"),
        F.avg("queue_depth").alias("queue_depth_mean"),
    ).select("*", F.col("lat")[0].alias("hop_latency_p50_ns"), F.col("lat")[1].alias("hop_latency_p99_ns")).drop("lat")
    per_path = tx.groupBy(*PATH).agg(F.count("*").alias("transmissions"), F.sum(F.col("lost").cast("long")).alias("lost"))
    sw_loss = (
        per_path.join(switches_of_path, PATH)
        .select(F.explode("switches").alias("switch_id"), "transmissions", "lost")
        .groupBy("switch_id")
        .agg(F.sum("transmissions").alias("transmissions"), F.sum("lost").alias("lost"))
        .withColumn("loss_rate", F.col("lost") / F.col("transmissions"))
    )
    switches = sw_delay.join(sw_loss, "switch_id", "full")
    return hosts, evs, switches


def stalls(spark, packets, to_ref):
    """Each stall of each capture (its direction, start and latest time seen
    by the engine), on the reference clock."""
    data = F.col("type") == "DATA"
    s = packets.where(F.col("stall_elapsed_ns").isNotNull()).select(
        "capture", "host",
        F.when(data, F.col("src")).otherwise(F.col("dst")).alias("src"),
        F.when(data, F.col("dst")).otherwise(F.col("src")).alias("dst"),
        F.when(data, F.col("src_conn")).otherwise(F.col("dst_conn")).cast("long").alias("src_conn"),
        F.when(data, F.col("dst_conn")).otherwise(F.col("src_conn")).cast("long").alias("dst_conn"),
        (F.col("ts_ns") - F.col("stall_elapsed_ns").cast("long")).alias("start_own"),
        F.col("ts_ns").alias("ts"),
    )
    per = s.groupBy("capture", "host", "src", "dst", "src_conn", "dst_conn", "start_own").agg(F.max("ts").alias("end_own"))
    return per.join(_align(spark, to_ref), "capture", "left").select(
        "*",
        (F.col("start_own") - F.coalesce("to_ref", F.lit(0))).alias("start"),
        (F.col("end_own") - F.coalesce("to_ref", F.lit(0))).alias("end"),
    ).drop("to_ref")


def incidents(stall_df):
    """Stalls grouped into incidents: overlapping intervals on the
    reference clock (gaps and islands over the stalls, not the packets)."""
    order = Window.orderBy("start", "end", "capture")
    prev_end = F.max("end").over(order.rowsBetween(Window.unboundedPreceding, -1))
    flagged = stall_df.withColumn("new", F.when(prev_end.isNull() | (F.col("start") > prev_end), 1).otherwise(0))
    return flagged.withColumn("incident", F.sum("new").over(order.rowsBetween(Window.unboundedPreceding, 0)) - 1).drop("new")


def rank_culprits(tx, hops, switches_of_path, windows, lookback_ns, top=5):
    """Per incident, switches and paths ranked by how much their loss and
    delay rose inside the incident's window (from ``lookback_ns`` before its
    first stall, where the cause lies, to its end). ``windows``: DataFrame
    ``incident, start, end``. Returns two DataFrames (switches, paths) with
    ``rank`` 1..top per incident."""
    w = F.broadcast(windows.withColumn("start", F.col("start") - F.lit(lookback_ns)))

    def rise(df, keys, value):
        # Rows join the windows they fall in (a range join against the few
        # incidents: no row is copied per incident); the rest of the job is
        # the total minus the window.
        total = df.groupBy(*keys).agg(F.count("*").alias("n_all"), F.sum(value).alias("v_all"))
        inside = (
            df.join(w, (df["t"] >= w["start"]) & (df["t"] <= w["end"]))
            .groupBy("incident", *keys)
            .agg(F.count("*").alias("n_in"), F.sum(value).alias("v_in"))
        )
        return inside.join(total, keys).select(
            "incident", *keys,
            F.col("n_in"),
            F.try_divide(F.col("v_in"), F.col("n_in")).alias("in"),
            F.try_divide(F.col("v_all") - F.col("v_in"), F.col("n_all") - F.col("n_in")).alias("out"),
        )

    # Switches: delay from their own telemetry, loss from the paths crossing them.
    sw_delay = rise(hops, ["switch_id"], "hop_latency_ns")
    tx_sw = tx.join(switches_of_path, PATH).select(F.explode("switches").alias("switch_id"), "t", F.col("lost").cast("long").alias("lost"))
    sw_loss = rise(tx_sw, ["switch_id"], "lost")
    sw = sw_delay.select("incident", "switch_id", F.col("in").alias("lat_in"), F.col("out").alias("lat_out")).join(
        sw_loss.select("incident", "switch_id", F.col("in").alias("loss_in"), F.col("out").alias("loss_out"), "n_in"),
        ["incident", "switch_id"], "full",
    )
    # Paths: delay from their delivered packets, loss from all of them.
    path_delay = rise(tx.where(~F.col("lost")), PATH, "owd")
    path_loss = rise(tx.withColumn("lost_n", F.col("lost").cast("long")), PATH, "lost_n")
    pa = path_delay.select("incident", *PATH, F.col("in").alias("lat_in"), F.col("out").alias("lat_out")).join(
        path_loss.select("incident", *PATH, F.col("in").alias("loss_in"), F.col("out").alias("loss_out"), "n_in"),
        ["incident", *PATH], "full",
    )

    def scored(df, keys):
        d_lat = F.greatest(F.lit(0.0), F.coalesce("lat_in", F.lit(0.0)) - F.coalesce("lat_out", "lat_in", F.lit(0.0)))
        d_loss = F.greatest(F.lit(0.0), F.coalesce("loss_in", F.lit(0.0)) - F.coalesce("loss_out", F.lit(0.0)))
        per = Window.partitionBy("incident")
        df = df.withColumn("delay_rise_ns", d_lat).withColumn("loss_rise", d_loss)
        norm = lambda c: F.coalesce(F.col(c) / F.nullif(F.max(c).over(per), F.lit(0.0)), F.lit(0.0))  # noqa: E731
        df = df.withColumn("score", norm("loss_rise") + norm("delay_rise_ns"))
        ranked = df.withColumn("rank", F.row_number().over(per.orderBy(F.desc("score"), *keys))).where(F.col("rank") <= top)
        return ranked

    return scored(sw, ["switch_id"]), scored(pa, PATH)
