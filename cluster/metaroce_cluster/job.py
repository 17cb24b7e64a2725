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

from . import between, fabric, inputs, tables


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
    p.add_argument("--buckets", type=int, default=0,
                   help="buckets of the reduce (partitions of the sightings; default: one per core, more when the packet "
                        "rows exceed 4 M per bucket). A bucket's "
                        "sightings are matched in one task's memory: about 240 bytes each")
    p.add_argument("--tables", action="store_true",
                   help="also write DIR/tables/* (Parquet: per-transmission tables, written by the reduce's second "
                        "pass, and the report's lists)")
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


def load(spark, args, messages):
    """Runs the map step and names every host. Returns ``items``:
    ``items[i] = (host, packets dir, captures dir)`` in
    host-name order (either dir None when missing)."""
    fs = inputs.Fs(spark)
    captures, roots = inputs.classify(fs, args.inputs, messages)
    out_exports = posixpath.join(args.out, "exports")
    # Every host name, from export roots and capture stems, made unique.
    # Each root's tables listed once (a listing is many calls to the JVM).
    listed = {root: (inputs.host_dirs(fs, root, "packets"), inputs.host_dirs(fs, root, "captures"))
              for root in roots}
    named = []
    for i, root in enumerate(roots):
        for h in sorted(set(listed[root][0]) | set(listed[root][1])):
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
    items = []
    for root, names in zip(roots, hosts_of_root):
        if not names:
            continue
        if root == out_exports:  # written by the map step since
            listed[root] = (inputs.host_dirs(fs, root, "packets"), inputs.host_dirs(fs, root, "captures"))
        packets, spans = listed[root]
        items += [(u, packets.get(h), spans.get(h)) for h, u in names.items()]
    return sorted(items)


def hosts_analysed(items, infos, version, messages):
    """The hosts analysed, in name order (``capture``: index), from what
    each host's task read; ``remap[i]``: the capture of ``items[i]`` (-1:
    left out). A pure function of its arguments: pass 1's tasks run it
    on the same infos as the driver."""
    hosts, remap = [], []
    for (h, _, _), info in zip(items, infos):
        for p in info["problems"]:
            messages.append(f"host {h}: {p}")
        n, s = info["rows"], info["captures"]
        remap.append(-1)
        if s is not None and s.get("engine_version") != version:
            messages.append(f"host {h}: exported by the engine {s.get('engine_version') or 'of an older build'}, "
                            f"this job runs {version}: its per-packet verdicts are that engine's")
        if s is None and n == 0:
            messages.append(f"host {h}: its export has neither a readable packets table nor a captures table: skipped")
            continue
        if s is None:
            messages.append(f"host {h}: its export has no captures table (partial or older export): "
                            "its capture span is taken from its packets")
            host = {"host": h, "frames": None, "first_ts_ns": info["first"], "last_ts_ns": info["last"], "packets": n}
        else:
            if s["frames"] == 0:
                messages.append(f"host {h}: its capture holds no frames (no traffic captured): skipped")
                continue
            if n != s["packets_exported"]:
                messages.append(f"host {h}: its export is incomplete ({n} of {s['packets_exported']} packet rows "
                                "readable): analysed with what is there")
            if n == 0:
                messages.append(f"host {h}: no MetaRoCE or RoCEv2 packets in its capture: it cannot be matched")
            host = {"host": h, "frames": s["frames"], "first_ts_ns": s["first_ts_ns"], "last_ts_ns": s["last_ts_ns"],
                    "packets": n}
        remap[-1] = host["capture"] = len(hosts)
        hosts.append(host)
    return hosts, remap


def spans_of(hosts):
    """Each analysed host's capture span, as the engine takes them."""
    return [(h["first_ts_ns"] or 0, h["last_ts_ns"] or 0) for h in hosts]


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
    version = engine_version()
    items = load(spark, args, messages)
    rows = between.packet_rows(items)
    buckets = args.buckets or between.default_buckets(rows, spark.sparkContext.defaultParallelism)
    phases.done("map and load")
    # Part of the fixed cost: a task per core loads the engine and
    # reserves the heap its buckets need (the Python workers are reused by
    # the tasks that follow).
    between.load_engine(spark, version, between.heap_per_task(rows, buckets))
    phases.done("engine loaded")
    blobs = between.read_hosts(spark, items, buckets, version)

    def analysed(infos):
        hosts, remap = hosts_analysed(items, infos, version, [])
        return spans_of(hosts), remap

    # The hosts' tables read and matched in one job: its tasks decide
    # which hosts are analysed as the driver does below.
    paths, job, infos, host_stalls = between.match_buckets(blobs, analysed, version, args.window_ns, rows=args.tables)
    hosts, remap = hosts_analysed(items, infos, version, messages)
    phases.done("hosts read and matched")
    overlap_messages(hosts, messages)
    report = {"capture": {"files": len(hosts)}, "hosts": hosts, "between_captures": [], "fabric": {},
              "incidents": [], "messages": messages, "phases_s": phases.times}
    if not any(h["packets"] for h in hosts):
        messages.append("no host has packets to analyse")
        return report
    spans = spans_of(hosts)
    offsets = {(a, b): o for a, b, o in metaroce_module().offsets(spans, paths)}
    phases.done("clock offsets")

    # One clock for the job.
    name = {h["capture"]: h["host"] for h in hosts}
    to_ref, ref_of = fabric.reference_offsets(len(hosts), offsets)
    if len(set(ref_of.values())) > 1:
        for h in hosts:
            if ref_of[h["capture"]] != 0:
                messages.append(f"host {h['host']}: its clock could not be related to {name[0]}'s "
                                "(no traffic chain between them): its times stay on its own clock")
    for h in hosts:
        h["clock_to_reference_ns"] = to_ref.get(h["capture"], 0) if ref_of.get(h["capture"]) == 0 else None
    report["capture"]["reference_clock"] = name[0]
    stalls = fabric.stalls([(remap[index], found) for index, found in host_stalls], name, to_ref)
    incidents = fabric.incidents(stalls)
    windows = [(i["start_ns"] - args.lookback_ns, i["end_ns"]) for i in incidents]

    tables_dir = tables.prepare(args.out) if args.tables else None
    parts = between.partials(blobs, job, spans, remap, paths, [to_ref.get(c, 0) for c in range(len(hosts))], windows,
                             version, args.window_ns, tables_dir)
    done = json.loads(metaroce_module().assemble(spans, paths, parts, len(windows), top=args.top))
    phases.done("between captures")

    report["between_captures"] = done["between_captures"]
    for b in report["between_captures"]:
        b["host_a"], b["host_b"] = name[b["capture_a"]], name[b["capture_b"]]
        if b["offset_estimated"] and abs(b["clock_offset_ns"]) >= 100_000_000:
            messages.append(f"clock of {b['host_b']} is {b['clock_offset_ns'] / 1e9:+.3f} s from {b['host_a']}'s "
                            "(estimated from their traffic; the analysis corrects it)")
    paired = set()
    for b in report["between_captures"]:
        paired |= {b["capture_a"], b["capture_b"]}
    for c, n in done["unmatched"]:
        if n and c not in paired:
            messages.append(
                f"host {name[c]}: none of its {n} transmissions matched another capture within "
                f"{args.window_ns / 1e9:g} s: its clock may be off by more than that, or its peers were not captured")

    host_view = []
    for r in done["fabric"]["hosts"]:
        up, down = r.pop("up"), r.pop("down")
        host_view.append({**r, "src_host": name.get(up), "dst_host": name.get(down)})
    report["fabric"] = {"hosts": host_view, "evs": done["fabric"]["evs"], "switches": done["fabric"]["switches"]}
    for incident, found in zip(incidents, done["culprits"]):
        for p in found["paths"]:
            p["src_host"], p["dst_host"] = name.get(p["up"]), name.get(p["down"])
        incident["culprit_switches"] = found["switches"]
        incident["culprit_paths"] = found["paths"]
    report["incidents"] = incidents
    phases.done("fabric views and incidents")
    if args.tables:
        tables.write(spark, args.out, report, stalls)
        phases.done("tables written")
    return report


def metaroce_module():
    import metaroce

    return metaroce


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    spark = (
        SparkSession.builder.appName("metaroce-postmortem")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        # What the reduce shuffles is the engine's LZ4 blocks already.
        .config("spark.shuffle.compress", "false")
        .getOrCreate()
    )
    # The fixed cost: from spark-submit's start (postmortem.sh's clock) to
    # the session, and the phase "engine loaded".
    submitted = os.environ.get("METAROCE_SUBMIT_EPOCH")
    started = time.time() - float(submitted) if submitted else None
    report = run(spark, args)
    phases = report.setdefault("phases_s", {})
    phases["fixed cost"] = round(started + phases.get("engine loaded", 0), 3) if started is not None else None
    text = json.dumps(report, indent=2, default=str) + "\n"
    path = posixpath.join(args.out, "report.json")
    inputs.Fs(spark).write_text(path, text)
    for m in report["messages"]:
        print(f"postmortem: {m}", file=sys.stderr, flush=True)
    first = report["incidents"][0]["culprit_switches"][:1] if report["incidents"] else []
    print(f"postmortem: {len(report['hosts'])} hosts, {len(report['incidents'])} incidents"
          + (f", first culprit switch {first[0]['switch_id']:#x}" if first else "") + f"; wrote {path}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
