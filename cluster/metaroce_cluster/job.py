"""The post-mortem job: map (``metaroce-analyze export`` per capture, as
Spark tasks) and reduce (between_captures, fabric views, incidents) over
every host's tables. Run by ``cluster/postmortem.sh``; see
cluster/README.md for the output.

    spark-submit --py-files metaroce_cluster.zip cluster/main.py \
        --out DIR [--analyzer BIN] INPUT...
"""

import argparse
import json
import os
import posixpath
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from . import between, fabric, inputs


def engine_version():
    """The driver's engine (the ``metaroce`` package), or a clear error."""
    try:
        import metaroce
    except ImportError as e:
        raise SystemExit(
            f"postmortem: the metaroce package is missing ({e}): build and install python/ "
            "(cluster/README.md: scripts/build-wheel.sh), or ship it with --archives"
        ) from None
    return metaroce.engine_version()


def parse_args(argv):
    p = argparse.ArgumentParser(prog="postmortem", description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True, help="output directory (report.json, tables/, exports/)")
    p.add_argument("--analyzer", default=os.environ.get("METAROCE_ANALYZE", "metaroce-analyze"),
                   help="the metaroce-analyze binary (built with the export feature) for the map step")
    p.add_argument("--window-ns", type=int, default=between.WINDOW_NS,
                   help="how long a transmission waits for its copy in another capture (the engine's default)")
    p.add_argument("--lookback-ns", type=int, default=1_000_000,
                   help="culprits are looked for from this long before an incident's first stall (the engine "
                        "declares a stall after its threshold, 1 ms by default, without progress)")
    p.add_argument("--top", type=int, default=5, help="culprits listed per incident")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="capture files or export directories")
    return p.parse_args(argv)


class Phases:
    """Wall time of each phase of the job, printed on stderr and kept in
    the report (``phases_s``)."""

    def __init__(self):
        self.t = time.monotonic()
        self.times = {}

    def done(self, name):
        now = time.monotonic()
        self.times[name] = round(now - self.t, 3)
        print(f"postmortem: {name}: {now - self.t:.1f} s", file=sys.stderr)
        self.t = now


def rows(df, order=None):
    """Small, aggregated results as JSON-ready dicts."""
    if order is not None:
        df = df.orderBy(*order)
    return [r.asDict(recursive=True) for r in df.collect()]


def load(spark, args, messages):
    """Runs the map step and reads every host's tables. Returns
    ``(packets, hosts)``: packets with ``capture`` (index of its host in
    name order) and ``hosts``: ``[{capture, host, first_ts_ns, last_ts_ns,
    ...}]`` of the hosts analysed."""
    fs = inputs.Fs(spark)
    captures, roots = inputs.classify(fs, args.inputs, messages)
    out_exports = posixpath.join(args.out, "exports")
    # Every host name, from export roots and capture stems, made unique.
    named = []
    for i, root in enumerate(roots):
        for h in sorted(set(inputs.host_dirs(fs, root, "packets")) | set(inputs.host_dirs(fs, root, "captures"))):
            named.append((h, (i, root)))
    named += [(inputs.capture_stem(c), (len(roots), c)) for c in captures]
    unique = inputs.unique_names(named, messages)
    hosts_of_root = [dict() for _ in range(len(roots) + 1)]
    for (u, (i, _)), (h, _) in zip(unique, named):
        if i < len(roots):
            hosts_of_root[i][h] = u
    to_map = [(u, src) for u, (i, src) in unique if i == len(roots)]
    if to_map:
        for h in inputs.run_map(spark, args.analyzer, to_map, out_exports, messages):
            hosts_of_root[len(roots)][h] = h
    roots = roots + [out_exports]

    packets = inputs.read_table(spark, fs, roots, "packets", hosts_of_root)
    spans = inputs.read_table(spark, fs, roots, "captures", hosts_of_root)
    all_hosts = sorted(u for m in hosts_of_root for u in m.values())
    counts = {}
    if packets is not None:
        counts = {r.host: (r.n, r.first, r.last) for r in packets.groupBy("host").agg(
            F.count("*").alias("n"), F.min("ts_ns").alias("first"), F.max("ts_ns").alias("last")).collect()}
    span = {}
    if spans is not None:
        span = {r.host: r for r in spans.collect()}
        ours = engine_version()
        for h, r in sorted(span.items()):
            theirs = r.asDict().get("engine_version")
            if theirs != ours:
                messages.append(f"host {h}: exported by the engine {theirs or 'of an older build'}, this job runs "
                                f"{ours}: its per-packet verdicts are that engine's")
    hosts = []
    for h in all_hosts:
        n, first, last = counts.get(h, (0, None, None))
        s = span.get(h)
        if s is None and n == 0:
            messages.append(f"host {h}: its export has neither a readable packets table nor a captures table: skipped")
            continue
        if s is None:
            messages.append(f"host {h}: its export has no captures table (partial or older export): "
                            "its capture span is taken from its packets")
            hosts.append({"host": h, "frames": None, "first_ts_ns": first, "last_ts_ns": last, "packets": n})
            continue
        if s.frames == 0:
            messages.append(f"host {h}: its capture holds no frames (no traffic captured): skipped")
            continue
        if n != s.packets_exported:
            messages.append(f"host {h}: its export is incomplete ({n} of {s.packets_exported} packet rows "
                            "readable): analysed with what is there")
        if n == 0:
            messages.append(f"host {h}: no MetaRoCE or RoCEv2 packets in its capture: it cannot be matched")
        hosts.append({"host": h, "frames": s.frames, "first_ts_ns": s.first_ts_ns, "last_ts_ns": s.last_ts_ns,
                      "packets": n})
    for i, h in enumerate(hosts):
        h["capture"] = i
    if packets is None or not hosts:
        return None, hosts
    index = spark.createDataFrame([(h["host"], h["capture"]) for h in hosts], "host string, capture int")
    packets = packets.join(F.broadcast(index), "host").withColumn("ts_ns", F.col("ts_ns").cast("long")).withColumn(
        "frame", F.col("frame").cast("long"))
    return packets, hosts


def overlap_messages(hosts, messages):
    for h in hosts:
        if h["first_ts_ns"] is None:
            continue
        others = [o for o in hosts if o is not h and o["first_ts_ns"] is not None]
        if others and not any(o["first_ts_ns"] <= h["last_ts_ns"] and h["first_ts_ns"] <= o["last_ts_ns"] for o in others):
            messages.append(f"host {h['host']}: its capture overlaps no other capture in time "
                            "(on the capture clocks): nothing of it can be matched")


def run(spark, args):
    messages = []
    phases = Phases()
    packets, hosts = load(spark, args, messages)
    phases.done("map and load")
    overlap_messages(hosts, messages)
    report = {"capture": {"files": len(hosts)}, "hosts": hosts, "between_captures": [], "fabric": {},
              "incidents": [], "messages": messages}
    tables = posixpath.join(args.out, "tables")
    if packets is None:
        messages.append("no host has packets to analyse")
        return report
    # Not cached: each phase reads only the columns it needs from Parquet.
    version = engine_version()
    spans = [(h["first_ts_ns"] or 0, h["last_ts_ns"] or 0) for h in hosts]
    sight = between.sightings(packets)
    tx = between.match(sight, spans, version, args.window_ns).cache()
    matched = tx.where(F.col("state") == "matched")
    paths = between.path_sums(matched)
    owd = between.one_way_delays(matched, spans, paths, version).cache()
    counted_lost = between.judge(tx.where(F.col("state") != "matched"), spans, paths, version).cache()
    report["between_captures"] = between.between_captures(owd, counted_lost, spans, paths)
    offsets = {(b["capture_a"], b["capture_b"]): b["clock_offset_ns"] for b in report["between_captures"]
               if b["offset_estimated"]}
    phases.done("between captures")
    name = {h["capture"]: h["host"] for h in hosts}
    for b in report["between_captures"]:
        b["host_a"], b["host_b"] = name[b["capture_a"]], name[b["capture_b"]]
        if b["offset_estimated"] and abs(b["clock_offset_ns"]) >= 100_000_000:
            messages.append(f"clock of {b['host_b']} is {b['clock_offset_ns'] / 1e9:+.3f} s from {b['host_a']}'s "
                            "(estimated from their traffic; the analysis corrects it)")
    # Transmissions of each capture the matcher did not match (all of
    # them for a capture that matched nothing).
    unmatched_by = tx.where(F.col("state") != "matched").groupBy(F.col("ca").alias("c")).agg(F.count("*").alias("n"))
    matched_by = {r.c: r.n for r in unmatched_by.collect()}
    paired = set()
    for b in report["between_captures"]:
        paired |= {b["capture_a"], b["capture_b"]}
    for h in hosts:
        if matched_by.get(h["capture"], 0) and h["capture"] not in paired:
            messages.append(
                f"host {h['host']}: none of its {matched_by[h['capture']]} transmissions matched another capture within "
                f"{args.window_ns / 1e9:g} s: its clock may be off by more than that, or its peers were not captured")

    # One clock for the job.
    to_ref, ref_of = fabric.reference_offsets(len(hosts), offsets)
    refs = sorted(set(ref_of.values()))
    if len(refs) > 1:
        for h in hosts:
            if ref_of[h["capture"]] != 0:
                messages.append(f"host {h['host']}: its clock could not be related to {name[0]}'s "
                                "(no traffic chain between them): its times stay on its own clock")
    for h in hosts:
        h["clock_to_reference_ns"] = to_ref.get(h["capture"], 0) if ref_of.get(h["capture"]) == 0 else None
    report["capture"]["reference_clock"] = name[0]

    paths_down = owd.select("up", "down", "rocev2", "src", "dst", "src_conn", "dst_conn").distinct()
    tx = fabric.transmissions(spark, owd, counted_lost, paths_down, to_ref).cache()
    hops = fabric.hop_rows(tx, packets).cache()
    sw_of_path = fabric.path_switches(hops).cache()
    host_names = spark.createDataFrame(sorted(name.items()), "capture int, host string")
    host_view, ev_view, sw_view = (v.cache() for v in fabric.views(tx, hops, sw_of_path, host_names))
    report["fabric"] = {
        "hosts": rows(host_view.drop("up", "down"), ["src_host", "dst_host"]),
        "evs": rows(ev_view, ["ev"]),
        "switches": rows(sw_view, ["switch_id"]),
    }

    phases.done("fabric views")
    stall_df = fabric.stalls(spark, packets, to_ref)
    inc = fabric.incidents(stall_df).cache()
    windows = inc.groupBy("incident").agg(F.min("start").alias("start"), F.max("end").alias("end")).cache()
    sw_rank, path_rank = (r.cache() for r in fabric.rank_culprits(tx, hops, sw_of_path, windows, args.lookback_ns, args.top))
    sw_by = {}
    for r in rows(sw_rank, ["incident", "rank"]):
        sw_by.setdefault(r.pop("incident"), []).append(r)
    path_by = {}
    for r in rows(path_rank, ["incident", "rank"]):
        i = r.pop("incident")
        r["src_host"], r["dst_host"] = name.get(r["up"]), name.get(r["down"])
        path_by.setdefault(i, []).append(r)
    summary = inc.groupBy("incident").agg(
        F.min("start").alias("start_ns"), F.max("end").alias("end_ns"), F.count("*").alias("stalls"),
        F.array_sort(F.collect_set("host")).alias("hosts"),
        F.array_sort(F.collect_set(F.struct("host", "src", "dst", "src_conn", "dst_conn"))).alias("connections"),
    )
    for r in rows(summary, ["incident"]):
        r["duration_ns"] = r["end_ns"] - r["start_ns"]
        r["culprit_switches"] = sw_by.get(r["incident"], [])
        r["culprit_paths"] = path_by.get(r["incident"], [])
        report["incidents"].append(r)

    phases.done("incidents")
    for df, table in ((owd, "matched"), (counted_lost, "lost"), (tx, "transmissions"), (hops, "hops"),
                      (host_view, "fabric_hosts"), (ev_view, "fabric_evs"), (sw_view, "fabric_switches"),
                      (inc, "stalls"), (sw_rank, "incident_switches"), (path_rank, "incident_paths")):
        df.write.mode("overwrite").parquet(posixpath.join(tables, table))
    phases.done("tables written")
    report["phases_s"] = phases.times
    return report


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spark = (
        SparkSession.builder.appName("metaroce-postmortem")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .getOrCreate()
    )
    # The fixed cost: from spark-submit's start (postmortem.sh's clock) to
    # the end of a first one-task job.
    spark.sparkContext.parallelize([0], 1).count()
    submitted = os.environ.get("METAROCE_SUBMIT_EPOCH")
    fixed = round(time.time() - float(submitted), 3) if submitted else None
    report = run(spark, args)
    report.setdefault("phases_s", {})["spark start to first task"] = fixed
    text = json.dumps(report, indent=2, default=str) + "\n"
    path = posixpath.join(args.out, "report.json")
    if "://" in args.out:
        inputs.Fs(spark).write_text(path, text)
    else:
        os.makedirs(args.out, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    for m in report["messages"]:
        print(f"postmortem: {m}", file=sys.stderr, flush=True)
    first = report["incidents"][0]["culprit_switches"][:1] if report["incidents"] else []
    print(f"postmortem: {len(report['hosts'])} hosts, {len(report['incidents'])} incidents"
          + (f", first culprit switch {first[0]['switch_id']:#x}" if first else "") + f"; wrote {path}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
