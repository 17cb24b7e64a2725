"""The Spark reduce's engine calls in one process, without Spark: each
host's packets read (pyarrow) and cut into bucket blobs
(``metaroce.shard``), every bucket matched (pass 1,
``metaroce.match_paths``), the offsets (``metaroce.offsets``), every
bucket's partials (pass 2, ``metaroce.match_partials``) and the report
(``metaroce.assemble``), in the order and with the arguments of
``metaroce_cluster.job.run``. Prints one JSON object: the CPU seconds of
each phase, the matched transmissions, and the engine's matched/s per
core over shard + pass 1 + pass 2 (the engine's share of the job's
``match s``; reading Parquet and assembling are apart).

    python cluster/engine_bench.py EXPORTS_DIR [--cores N] [--report FILE]

(``--report``: the assembled report, whose ``between_captures`` is the
job's and ``report --json``'s, written to FILE.)

(``cluster/bench.sh`` runs it beside the Spark job.)
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pyarrow.compute as pc  # noqa: E402

import metaroce  # noqa: E402
from metaroce_cluster import between, fabric, worker_process  # noqa: E402

LOOKBACK_NS = 1_000_000  # job.py's --lookback-ns default
TOP = 5  # job.py's --top default


def host_dirs(root, table):
    """``{host: path}`` of a table of a local export root."""
    base = os.path.join(root, f"table={table}")
    return {c[len("host="):]: os.path.join(base, c) for c in sorted(os.listdir(base)) if c.startswith("host=")}


class Clock:
    """CPU seconds of this process per phase."""

    def __init__(self):
        self.cpu = {}
        self.at = time.process_time()

    def done(self, phase):
        now = time.process_time()
        self.cpu[phase] = self.cpu.get(phase, 0.0) + now - self.at
        self.at = now


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("exports")
    p.add_argument("--cores", type=int, default=2, help="the job's cores (its default bucket count)")
    p.add_argument("--report", help="write the assembled report (JSON) there")
    args = p.parse_args()
    # The settings of the job's Python workers.
    worker_process.install()

    packets = host_dirs(args.exports, "packets")
    captures = host_dirs(args.exports, "captures")
    items = [(h, packets.get(h), captures.get(h)) for h in sorted(set(packets) | set(captures))]
    buckets = between.default_buckets(between.packet_rows(items), args.cores)
    columns = between.STRING_COLUMNS + ["malformed"] + between.INT_COLUMNS + between.LIST_COLUMNS

    clock = Clock()
    per_bucket = [[] for _ in range(buckets)]
    hosts, spans, remap, host_stalls = [], [], [], []
    for index, (host, packets_dir, _) in enumerate(items):
        problems = []
        table = between._read(packets_dir, columns, problems, dictionaries=between.STRING_COLUMNS)
        if problems or table is None or not table.num_rows:
            raise SystemExit(f"engine_bench: host {host}: no readable packets {problems}")
        table = between._packets(table)
        batches = table.to_batches()
        mm = pc.min_max(table.column("ts_ns")).as_py()
        clock.done("read s")
        host_stalls.append((index, metaroce.stalls(batches)))
        for b, blob in metaroce.shard(batches, index, buckets):
            per_bucket[b].append(blob)
        clock.done("shard s")
        remap.append(index)
        hosts.append(host)
        spans.append((mm["min"], mm["max"]))

    kept, path_sums = [], []
    for blobs in per_bucket:
        sums, k = metaroce.match_paths(blobs, spans, remap, window_ns=between.WINDOW_NS)
        path_sums.append(sums)
        kept.append(k)
    paths = metaroce.merge_paths(path_sums)
    offsets = {(a, b): o for a, b, o in metaroce.offsets(spans, paths)}
    clock.done("pass 1 s")

    name = dict(enumerate(hosts))
    to_ref, _ = fabric.reference_offsets(len(hosts), offsets)
    incidents = fabric.incidents(fabric.stalls(host_stalls, name, to_ref))
    windows = [(i["start_ns"] - LOOKBACK_NS, i["end_ns"]) for i in incidents]
    refs = [to_ref.get(c, 0) for c in range(len(hosts))]
    clock.done("driver s")

    parts = [metaroce.match_partials(k, spans, paths, refs, windows) for k in kept]
    clock.done("pass 2 s")
    done = json.loads(metaroce.assemble(spans, paths, parts, len(windows), top=TOP))
    clock.done("assemble s")

    matched = sum(b["matched_packets"] for b in done["between_captures"])
    engine = clock.cpu["shard s"] + clock.cpu["pass 1 s"] + clock.cpu["pass 2 s"]
    out = {"hosts": len(hosts), "buckets": buckets, "matched": matched}
    out.update({k: round(v, 3) for k, v in clock.cpu.items()})
    out["engine s"] = round(engine, 3)
    out["engine matched/s/core"] = round(matched / engine) if engine > 0 else None
    if args.report:
        with open(args.report, "w") as f:
            json.dump(done, f)
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
