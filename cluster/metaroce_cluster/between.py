"""Transmissions matched across capture points, clock offsets, one-way
delays and loss between capture points: ``between_captures`` of
``metaroce-analyze report`` (analyzer/src/engine/merge.rs), as distributed
joins and aggregations over every host's ``packets`` table.

The rules are the engine's, stated here once for the Spark plan:

- A transmission is MetaRoCE (direction, type, PSN, tx_ts, ev, path_seq),
  CTRL and malformed packets excluded; or RoCEv2 (src, dst, dest QP,
  opcode, PSN) on its UDP source port (in ``ev``), CNPs excluded.
- Sightings of one transmission, in the merged order of all captures
  (capture time, then capture index), go through the matcher's state: the
  first waits; a sighting in another capture within ``window_ns`` matches
  it; a second sighting in the same capture is a duplicate (MetaRoCE, the
  first stands) or a retransmission (RoCEv2, it replaces the first, which
  leaves unmatched); a wait longer than ``window_ns`` ends unmatched.
- An unmatched sighting that left the window counts as lost between the
  points when every other capture had started before it. One still
  waiting at the end is judged against the captures downstream of its own
  (those that matched traffic with it): when every one of them had started
  before it (offset-corrected with the estimated offsets, 0 when not
  estimated), it is lost when every one of them ran on for its end margin
  after it (4 times the largest one-way delay measured between the two
  captures, on its path or else on any of theirs), and of unknown fate
  otherwise or with no capture downstream.
- Clock offset of b relative to a: per direction (MetaRoCE) or host pair
  (RoCEv2) the min, max and mean of ``ts_b - ts_a``; for each one whose
  reverse was matched too, ``(min of the one seen first at a + max of the
  other) / 2``; the mean of those estimates.
- One-way delay per path: ``ts_b - ts_a - offset`` (or its negation when
  the path's packets reach b first), at least 0, summarised like the
  engine's histograms (hdr.py).

Differences, by design: the engine keeps at most ``samples`` (4096)
delay samples per path (a reservoir) and at most ``max_pending`` (1 Mi)
waiting transmissions; this job keeps all, so percentiles equal the
engine's when a path has at most 4096 matched transmissions, and counts
equal it while fewer than 1 Mi transmissions wait at once. A sighting that
leaves the window is judged against every capture that ever started, the
engine against those that had started when it left (they differ only for a
capture whose first frame comes more than ``window_ns`` after the
sighting).
"""

import ipaddress

from pyspark.sql import Window
from pyspark.sql import functions as F

from . import hdr

# The engine's MergeConfig defaults, and its end margin in one-way delays.
WINDOW_NS = 1_000_000_000
END_MARGIN_DELAYS = 4

# MetaRoCE CTRL and RoCEv2 CNP type codes (spec section 2; IBTA annex A17).
METAROCE_CTRL = 6
ROCEV2_CNP = 0x81

FLOW = ["rocev2", "src", "dst", "src_conn", "dst_conn"]
KEY = FLOW + ["ptype", "psn", "tx_ts", "ev", "path_seq"]
PATH = ["ca", "cb"] + FLOW + ["ev"]

SIGHTING = "struct<ts:bigint,capture:int,frame:bigint>"


def sightings(packets):
    """One row per matchable packet: its transmission key and where and
    when it was captured. ``packets`` has the export's columns plus
    ``capture`` (the host's index)."""
    rocev2 = F.col("proto") == "rocev2"
    matchable = (~F.col("malformed")) & (
        ((F.col("proto") == "metaroce") & (F.col("type_code") != METAROCE_CTRL))
        | (rocev2 & (F.col("type_code") != ROCEV2_CNP))
    )
    return packets.where(matchable).select(
        rocev2.alias("rocev2"),
        "src",
        "dst",
        F.when(rocev2, F.lit(0)).otherwise(F.col("src_conn")).cast("long").alias("src_conn"),
        F.when(rocev2, F.col("dest_qp")).otherwise(F.col("dst_conn")).cast("long").alias("dst_conn"),
        F.col("type_code").cast("int").alias("ptype"),
        F.col("psn").cast("long").alias("psn"),
        F.coalesce(F.col("tx_ts"), F.lit(0)).cast("long").alias("tx_ts"),
        F.when(rocev2, F.col("src_port")).otherwise(F.col("ev")).cast("int").alias("ev"),
        F.coalesce(F.col("path_seq"), F.lit(0)).cast("int").alias("path_seq"),
        F.col("ts_ns").alias("ts"),
        "capture",
        "frame",
    )


def match(sight, window_ns=WINDOW_NS):
    """Applies the matcher to every transmission: ``(matched, unmatched)``.
    ``matched``: key, ``ca < cb``, ``ts_a``, ``ts_b``, ``frame_a``,
    ``frame_b``. ``unmatched``: key, capture, ts, ``at_end`` (still waiting
    when the captures ended, else it left the window)."""
    grouped = sight.groupBy(*KEY).agg(
        F.array_sort(F.collect_list(F.struct("ts", "capture", "frame"))).alias("s")
    )
    pair = f"struct<a:{SIGHTING},b:{SIGHTING}>"
    step = f"""
    aggregate(
      s,
      named_struct('p', cast(null as {SIGHTING}),
                   'm', cast(array() as array<{pair}>),
                   'd', cast(array() as array<{SIGHTING}>)),
      (acc, x) -> case
        -- nothing waits (or the wait was longer than the window): x waits
        when acc.p is null or acc.p.ts + {window_ns} < x.ts then named_struct(
          'p', x, 'm', acc.m,
          'd', if(acc.p is null, acc.d, concat(acc.d, array(acc.p))))
        -- a copy in another capture: matched
        when acc.p.capture != x.capture then named_struct(
          'p', cast(null as {SIGHTING}),
          'm', concat(acc.m, array(named_struct('a', acc.p, 'b', x))),
          'd', acc.d)
        -- RoCEv2 retransmission: replaces the waiting one, which leaves
        when rocev2 then named_struct('p', x, 'm', acc.m, 'd', concat(acc.d, array(acc.p)))
        -- MetaRoCE duplicate in the same capture: the first stands
        else acc
      end
    )"""
    state = grouped.select(*KEY, F.expr(step).alias("st")).cache()

    matched = state.select(*KEY, F.explode("st.m").alias("m")).select(
        *KEY,
        F.least("m.a.capture", "m.b.capture").alias("ca"),
        F.greatest("m.a.capture", "m.b.capture").alias("cb"),
        F.when(F.col("m.a.capture") < F.col("m.b.capture"), F.col("m.a.ts")).otherwise(F.col("m.b.ts")).alias("ts_a"),
        F.when(F.col("m.a.capture") < F.col("m.b.capture"), F.col("m.b.ts")).otherwise(F.col("m.a.ts")).alias("ts_b"),
        F.when(F.col("m.a.capture") < F.col("m.b.capture"), F.col("m.a.frame")).otherwise(F.col("m.b.frame")).alias("frame_a"),
        F.when(F.col("m.a.capture") < F.col("m.b.capture"), F.col("m.b.frame")).otherwise(F.col("m.a.frame")).alias("frame_b"),
    ).withColumn("delta", F.col("ts_b") - F.col("ts_a"))

    left = state.select(*KEY, F.explode("st.d").alias("u"), F.lit(False).alias("at_end"))
    waiting = state.where(F.col("st.p").isNotNull()).select(*KEY, F.col("st.p").alias("u"), F.lit(True).alias("at_end"))
    unmatched = left.unionByName(waiting).select(
        *KEY, F.col("u.capture").alias("capture"), F.col("u.ts").alias("ts"), F.col("u.frame").alias("frame"), "at_end"
    )
    return matched, unmatched


def trunc_div(a, b):
    """Integer division rounding toward zero (Rust's ``/`` on integers)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def clock_offsets(matched):
    """``{(a, b): offset_ns}`` for every capture pair with an estimate, and
    the per-path aggregates (``ca, cb, flow, ev, n, dmin, dmax, dsum``) as a
    small DataFrame. Only aggregates reach the driver."""
    paths = matched.groupBy(*PATH).agg(
        F.count("*").alias("n"),
        F.min("delta").alias("dmin"),
        F.max("delta").alias("dmax"),
        F.sum(F.col("delta").cast("decimal(38,0)")).alias("dsum"),
    )
    # A RoCEv2 flow's reverse is any RoCEv2 flow between the same hosts the
    # other way: RoCEv2 directions are grouped by host pair.
    group_src_conn = F.when(F.col("rocev2"), F.lit(0)).otherwise(F.col("src_conn"))
    group_dst_conn = F.when(F.col("rocev2"), F.lit(0)).otherwise(F.col("dst_conn"))
    spreads = (
        paths.groupBy("ca", "cb", "rocev2", "src", "dst", group_src_conn.alias("gs"), group_dst_conn.alias("gd"))
        .agg(F.min("dmin").alias("min"), F.max("dmax").alias("max"), F.sum("dsum").alias("sum"), F.sum("n").alias("n"))
        .collect()
    )
    by_pair = {}
    for r in spreads:
        by_pair.setdefault((r.ca, r.cb), {})[(r.rocev2, r.src, r.dst, r.gs, r.gd)] = r
    offsets = {}
    for pair, dirs in by_pair.items():
        estimates = []
        for (rocev2, src, dst, gs, gd), d in dirs.items():
            r = dirs.get((rocev2, dst, src, gd, gs))
            if r is None:
                continue
            mean, rmean = float(d["sum"]) / float(d.n), float(r["sum"]) / float(r.n)
            forward, reverse = (d, r) if mean > rmean else (r, d)
            estimates.append(trunc_div(forward["min"] + reverse["max"], 2))
        if estimates:
            offsets[pair] = trunc_div(sum(estimates), len(estimates))
    return offsets, paths


def offset_between(offsets, frm, to):
    """Clock of ``to`` minus clock of ``frm`` (0 when not estimated)."""
    if frm < to:
        return offsets.get((frm, to), 0)
    return -offsets.get((to, frm), 0)


def max_one_way_delay(dmin, dmax, offset):
    """The largest offset-corrected one-way delay of a path's samples,
    whichever capture sees it first."""
    return max(dmax - offset, offset - dmin)


def loss_bounds(captures, offsets, path_rows, end_margin_delays=END_MARGIN_DELAYS):
    """When an unmatched sighting of capture c counts, as bounds on its
    time (the engine's rules with every other capture o folded in):

    - one that left the window counts as lost from ``left_from`` (every
      other capture had started);
    - one still waiting at the end is judged against the captures
      downstream of c (those that matched traffic with it; a capture that
      never did is off its path): it counts from ``end_from`` (every one of
      them had started, offset-corrected), as lost up to ``end_to`` (every
      one of them ran on for its end margin after it: ``end_margin_delays``
      times the largest one-way delay measured between c and o on the
      sighting's path, or on any path of the pair when that one has none)
      and as unknown after; with no capture downstream, as unknown.

    ``captures``: ``{index: (first_ts, last_ts)}``; ``path_rows``: the
    per-path aggregates (``ca, cb``, flow, ``ev, dmin, dmax``). Returns
    ``(per capture rows, per (capture, flow, ev) rows)``: the second holds
    ``end_to`` for the paths a capture pair matched, the first the
    ``end_to`` of every other path of the capture."""
    never = -(1 << 62)
    pair_max, path_max = {}, {}
    for r in path_rows:
        owd = max_one_way_delay(r.dmin, r.dmax, offsets.get((r.ca, r.cb), 0))
        pair_max[(r.ca, r.cb)] = max(pair_max.get((r.ca, r.cb), owd), owd)
        flow = (r.rocev2, r.src, r.dst, r.src_conn, r.dst_conn, r.ev)
        path_max.setdefault(flow, {})[(r.ca, r.cb)] = owd

    def end_to(c, o, owd):
        if owd is None:
            return never
        return captures[o][1] - offset_between(offsets, c, o) - end_margin_delays * max(owd, 0)

    generic = {}
    rows = []
    for c in captures:
        others = [o for o in captures if o != c]
        if not others:
            continue
        # At the end, only the captures downstream of c count: those that
        # matched traffic with it (a pair with no match is off the path).
        downstream = [o for o in others if (min(c, o), max(c, o)) in pair_max]
        bounds = {o: end_to(c, o, pair_max[(min(c, o), max(c, o))]) for o in downstream}
        generic[c] = bounds
        rows.append((
            c,
            max(captures[o][0] for o in others),
            max((captures[o][0] - offset_between(offsets, c, o) for o in downstream), default=never),
            min(bounds.values(), default=never),
        ))
    specific = []
    for flow, pairs in path_max.items():
        for (a, b), owd in pairs.items():
            for c in (a, b):
                if c not in generic:
                    continue
                bounds = dict(generic[c])
                for (pa, pb), powd in pairs.items():
                    if c in (pa, pb):
                        o = pb if c == pa else pa
                        bounds[o] = end_to(c, o, powd)
                specific.append((c, *flow, min(bounds.values())))
    return rows, sorted(set(specific))


def lost_between(spark, unmatched, bounds):
    """Unmatched transmissions judged: ``(rows, counts)``: the rows of the
    transmissions lost or of unknown fate (``fate``), and their counts per
    (capture, flow, ev, fate)."""
    rows, specific = bounds
    b = spark.createDataFrame(rows or [(-1, 0, 0, 0)], "capture int, left_from long, end_from long, end_to long")
    sp = spark.createDataFrame(
        specific or [(-1, False, "", "", 0, 0, 0, 0)],
        "capture int, rocev2 boolean, src string, dst string, src_conn long, dst_conn long, ev int, path_end_to long",
    )
    judged = (
        unmatched.join(F.broadcast(b), "capture")
        .join(F.broadcast(sp), ["capture", *FLOW, "ev"], "left")
        .withColumn("end_to", F.coalesce("path_end_to", "end_to"))
        .withColumn(
            "fate",
            F.when(~F.col("at_end"), F.when(F.col("ts") >= F.col("left_from"), "lost"))
            .when(F.col("ts") < F.col("end_from"), None)
            .when(F.col("ts") <= F.col("end_to"), "lost")
            .otherwise("unknown"),
        )
        .where(F.col("fate").isNotNull())
        .cache()
    )
    counts = judged.groupBy("capture", *FLOW, "ev", "fate").agg(F.count("*").alias("n"))
    missing = judged.drop("left_from", "end_from", "end_to", "path_end_to")
    return missing, counts


def one_way_delays(spark, matched, paths, offsets):
    """Matched transmissions with their path's upstream and downstream
    capture and offset-corrected one-way delay ``owd``."""
    off = spark.createDataFrame([(a, b, o) for (a, b), o in offsets.items()] or [(-1, -1, 0)], "ca int, cb int, offset long")
    # The direction of a path: its packets reach a first when their mean
    # ts_b - ts_a (rounded toward zero) is at least the offset.
    mean = F.expr("cast(dsum / n as bigint)")
    p = paths.join(F.broadcast(off), ["ca", "cb"], "left").select(
        *PATH, F.coalesce("offset", F.lit(0)).alias("offset"), (mean >= F.coalesce("offset", F.lit(0))).alias("a_first")
    )
    return matched.join(p, PATH).select(
        "*",
        F.when(F.col("a_first"), F.col("ca")).otherwise(F.col("cb")).alias("up"),
        F.when(F.col("a_first"), F.col("cb")).otherwise(F.col("ca")).alias("down"),
        F.greatest(
            F.lit(0), F.when(F.col("a_first"), F.col("delta") - F.col("offset")).otherwise(F.col("offset") - F.col("delta"))
        ).alias("owd"),
    )


def rank_samples(df, group, value):
    """Per group: count, min, max and the samples at the ranks the summary
    needs: ``{group tuple: (count, min, max, {rank: value})}``. Sorting and
    ranking run on the executors; only these few values per group reach
    the driver."""
    w = Window.partitionBy(*group).orderBy(value)
    counts = df.groupBy(*group).agg(F.count("*").alias("n"), F.min(value).alias("lo"), F.max(value).alias("hi"))
    ranks = F.array(*[F.greatest(F.lit(1), F.ceil(F.lit(q) * F.col("n").cast("double"))) for _, q in hdr.QUANTILES])
    picked = (
        df.withColumn("_r", F.row_number().over(w))
        .join(counts, group)
        .where(F.array_contains(ranks, F.col("_r")))
        .groupBy(*group)
        .agg(F.first("n").alias("n"), F.first("lo").alias("lo"), F.first("hi").alias("hi"),
             F.map_from_entries(F.collect_list(F.struct("_r", value))).alias("at"))
    )
    out = {}
    for r in picked.collect():
        out[tuple(r[g] for g in group)] = (r.n, r.lo, r.hi, dict(r.at))
    return out


def ip_key(text):
    ip = ipaddress.ip_address(text)
    return (ip.version, int(ip))


def between_captures(owd, counts, offsets, path_rows):
    """The ``between_captures`` list of ``report --json``, from the matched
    transmissions with their delays and the loss counts."""
    path_cols = ["ca", "cb", "up", "down"] + FLOW + ["ev"]
    summaries = rank_samples(owd, path_cols, "owd")
    judged = {
        (r.fate, r.capture, r.rocev2, r.src, r.dst, r.src_conn, r.dst_conn, r.ev): r.n for r in counts.collect()
    }
    deltas = {tuple(r[c] for c in PATH): (r.dmin, r.dmax) for r in path_rows}
    pairs = {}
    for key, (n, lo, hi, at) in summaries.items():
        ca, cb, up, down, rocev2, src, dst, src_conn, dst_conn, ev = key
        pairs.setdefault((ca, cb), []).append(
            {
                "proto": "rocev2" if rocev2 else "metaroce",
                "src": src,
                "dst": dst,
                "src_conn": src_conn,
                "dst_conn": dst_conn,
                "ev": ev,
                "upstream": up,
                "downstream": down,
                "matched": n,
                "lost_between": judged.get(("lost", up, rocev2, src, dst, src_conn, dst_conn, ev), 0),
                "unknown": judged.get(("unknown", up, rocev2, src, dst, src_conn, dst_conn, ev), 0),
                "end_margin_ns": END_MARGIN_DELAYS
                * max(0, max_one_way_delay(*deltas[(ca, cb, rocev2, src, dst, src_conn, dst_conn, ev)], offsets.get((ca, cb), 0))),
                "one_way_delay_ns": hdr.summary(n, lo, hi, at),
            }
        )
    out = []
    for (ca, cb), paths in sorted(pairs.items()):
        paths.sort(key=lambda p: (p["proto"], ip_key(p["src"]), ip_key(p["dst"]), p["src_conn"], p["dst_conn"], p["ev"]))
        out.append(
            {
                "capture_a": ca,
                "capture_b": cb,
                "clock_offset_ns": offsets.get((ca, cb), 0),
                "offset_estimated": (ca, cb) in offsets,
                "matched_packets": sum(p["matched"] for p in paths),
                "paths": paths,
            }
        )
    return out
