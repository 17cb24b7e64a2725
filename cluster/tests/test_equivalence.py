"""The Spark job against the single-machine analysis on the same captures
(8 hosts): clock offsets, one-way delays and loss between capture points
are equal, counts with zero tolerance; and it names the scenario's culprit
(written by hand beside the scenario) first. The per-transmission tables
(``--tables``) hold, row by row, what the report counts."""

import math
import os
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import POSTMORTEM, run

PER_TRANSMISSION = ("matched", "lost", "transmissions", "hops")
LISTS = ("fabric_hosts", "fabric_evs", "fabric_switches", "stalls", "incident_switches", "incident_paths")
FLOW = ("rocev2", "src", "dst", "src_conn", "dst_conn")


def without_names(between):
    return [{k: v for k, v in b.items() if k not in ("host_a", "host_b")} for b in between]


def test_between_captures_equal_the_single_machine_report(job8):
    spark = without_names(job8["report"]["between_captures"])
    single = job8["single"]["between_captures"]
    # The comparison means something: every ring neighbour pair, offsets
    # estimated, transmissions matched, and missing downstream (the
    # scenario's losses all happen within its last second, so the engine
    # judges them at the end of the captures: lost or unknown).
    assert len(single) == 8
    assert all(b["offset_estimated"] for b in single)
    assert sum(p["lost_between"] + p["unknown"] for b in single for p in b["paths"]) > 0
    assert sum(b["matched_packets"] for b in single) > 40_000
    assert spark == single


def test_hosts_are_named_in_capture_order(job8):
    report = job8["report"]
    assert [h["host"] for h in report["hosts"]] == [p.stem for p in job8["captures"]]
    assert report["messages"] == []
    for b in report["between_captures"]:
        assert (b["host_a"], b["host_b"]) == (f"host-{b['capture_a']:03}", f"host-{b['capture_b']:03}")


def test_the_injected_culprit_is_named_first(job8):
    culprit = job8["expected"]["culprit"]["switch_id"]
    incidents = job8["report"]["incidents"]
    assert incidents, "the fault makes connections stall"
    for incident in incidents:
        assert incident["culprit_switches"][0]["switch_id"] == culprit, incident
        assert len(incident["hosts"]) >= 2
    # The fabric view alone shows it too: the largest hop latency.
    switches = job8["report"]["fabric"]["switches"]
    assert max(switches, key=lambda s: s["hop_latency_p99_ns"])["switch_id"] == culprit


def test_incidents_lie_in_the_fault_window(job8):
    """Every incident starts in the fault window (or within the stall
    threshold, 1 ms, before it: a stall starts at the last progress before
    the loss). The reference clock is host-000's: in the scenario its first
    frame leaves at true time 1 ms."""
    fault = job8["expected"]["fault_true_time_ns"]
    ref_first = job8["report"]["hosts"][0]["first_ts_ns"]
    for incident in job8["report"]["incidents"]:
        true_start = incident["start_ns"] - ref_first + 1_000_000
        assert fault["start"] - 1_000_000 <= true_start <= fault["end"], incident


@pytest.fixture(scope="module")
def tables(job8):
    """The job's tables as Python rows: ``{table: [row dict]}``."""
    root = Path(job8["dir"]) / "out" / "tables"
    return {name: pq.read_table(root / name).to_pylist() for name in PER_TRANSMISSION + LISTS}


def test_each_bucket_wrote_one_part_per_table(job8):
    """One part per bucket and table (the job's 2 buckets in local[2]),
    and no temporary file left beside them."""
    root = Path(job8["dir"]) / "out" / "tables"
    for name in PER_TRANSMISSION:
        assert sorted(p.name for p in (root / name).iterdir()) == ["part-00000.parquet", "part-00001.parquet"], name
    for name in LISTS:
        assert list((root / name).glob("*.parquet")), name


def path_key(row):
    """A matched or lost row's path: (flow, ev)."""
    return tuple(row[k] for k in FLOW) + (row["ev"],)


def report_paths(report):
    """``{(capture_a, capture_b, flow, ev): path}`` of between_captures."""
    out = {}
    for b in report["between_captures"]:
        for p in b["paths"]:
            flow = (p["proto"] == "rocev2", p["src"], p["dst"], p["src_conn"], p["dst_conn"], p["ev"])
            out[(b["capture_a"], b["capture_b"]) + flow] = p
    return out


def test_matched_rows_are_the_matched_packets(job8, tables):
    report = job8["report"]
    matched = tables["matched"]
    assert len(matched) == sum(b["matched_packets"] for b in report["between_captures"]) > 40_000
    per_pair = Counter((r["ca"], r["cb"]) for r in matched)
    assert per_pair == {(b["capture_a"], b["capture_b"]): b["matched_packets"] for b in report["between_captures"]}
    paths = report_paths(report)
    per_path = Counter((r["ca"], r["cb"]) + path_key(r) for r in matched)
    assert per_path == {k: p["matched"] for k, p in paths.items() if p["matched"]}
    for r in matched:
        p = paths[(r["ca"], r["cb"]) + path_key(r)]
        assert (r["up"], r["down"]) == (p["upstream"], p["downstream"]), r
        assert r["state"] == "matched" and r["ca"] < r["cb"]
        assert r["delta"] == r["ts_b"] - r["ts_a"]


def summary(owd, buckets):
    """The engine's summary of a path's delays from its rows: each
    percentile is the lowest value of the quantile's histogram bucket (its
    rank as HdrHistogram counts it), or the exact extreme when that bucket
    holds it."""
    order = sorted(zip(buckets, owd))
    lo, hi = min(owd), max(owd)
    bucket_of = dict(zip(owd, buckets))

    def q(quantile):
        rank = max(1, math.ceil(quantile * len(owd)))
        b = order[rank - 1][0]
        if bucket_of[hi] == b:
            return hi
        if bucket_of[lo] == b:
            return lo
        return b

    return {"count": len(owd), "min": lo, "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999), "max": hi}


def test_matched_delays_give_the_report_summaries(job8, tables):
    """Per path, the rows' one-way delays and their histogram buckets give
    the report's delay summary: count, min, max and every percentile."""
    rows = {}
    for r in tables["matched"]:
        rows.setdefault((r["ca"], r["cb"]) + path_key(r), []).append(r)
    paths = report_paths(job8["report"])
    assert rows
    for key, rs in rows.items():
        assert summary([r["owd"] for r in rs], [r["owd_bucket"] for r in rs]) == paths[key]["one_way_delay_ns"], key


def test_lost_rows_are_the_lost_and_unknown_counts(job8, tables):
    lost = tables["lost"]
    fates = Counter(r["fate"] for r in lost)
    paths = report_paths(job8["report"]).values()
    assert fates["lost"] == sum(p["lost_between"] for p in paths) > 0
    assert fates["unknown"] == sum(p["unknown"] for p in paths)
    assert set(fates) <= {"lost", "unknown"}
    # Per upstream capture and path, as the report counts them.
    counted = Counter()
    for p in paths:
        key = (p["upstream"], p["proto"] == "rocev2", p["src"], p["dst"], p["src_conn"], p["dst_conn"], p["ev"])
        counted[key + ("lost",)] += p["lost_between"]
        counted[key + ("unknown",)] += p["unknown"]
    assert Counter((r["capture"],) + path_key(r) + (r["fate"],) for r in lost) == +counted


def test_transmissions_are_the_matched_and_the_counted_lost(job8, tables):
    """Every match once (delivered), every lost row once per capture its
    flow reached (or once, ``down`` null), on the reference clock; per
    host pair the fabric view's transmissions and losses."""
    report = job8["report"]
    tx = tables["transmissions"]
    delivered = [r for r in tx if not r["lost"]]
    assert Counter((r["up"], r["down"]) + path_key(r) + (r["owd"],) for r in delivered) == Counter(
        (r["up"], r["down"]) + path_key(r) + (r["owd"],) for r in tables["matched"])
    downs = {}
    for r in tables["matched"]:
        downs.setdefault((r["up"],) + path_key(r)[:5], set()).add(r["down"])
    expected_lost = Counter()
    for r in tables["lost"]:
        for down in downs.get((r["capture"],) + path_key(r)[:5], {None}):
            expected_lost[(r["capture"], down) + path_key(r) + (r["ts"],)] += 1
    lost = [r for r in tx if r["lost"]]
    assert Counter((r["up"], r["down"]) + path_key(r) + (r["ts"],) for r in lost) == expected_lost
    assert all(r["owd"] is None and r["frame_down"] is None for r in lost)
    to_ref = {h["capture"]: h["clock_to_reference_ns"] for h in report["hosts"]}
    assert all(r["t"] == r["ts"] - to_ref[r["up"]] for r in tx)
    name = {h["capture"]: h["host"] for h in report["hosts"]}
    per_hosts = Counter()
    lost_per_hosts = Counter()
    for r in tx:
        per_hosts[(name[r["up"]], name.get(r["down"]))] += 1
        lost_per_hosts[(name[r["up"]], name.get(r["down"]))] += r["lost"]
    fabric = report["fabric"]["hosts"]
    assert per_hosts == {(h["src_host"], h["dst_host"]): h["transmissions"] for h in fabric}
    assert +lost_per_hosts == +Counter({(h["src_host"], h["dst_host"]): h["lost"] for h in fabric})


def test_hops_are_those_of_the_delivered_copies(job8, tables):
    """One row per switch the downstream copy of a delivered transmission
    names (its packet row of the export, HOP_TELEMETRY), in order; per
    switch the fabric view's hop count and maxima."""
    report = job8["report"]
    exports = Path(job8["dir"]) / "out" / "exports" / "table=packets"
    capture = {h["host"]: h["capture"] for h in report["hosts"]}
    telemetry = {}
    for d in exports.iterdir():
        host = d.name.removeprefix("host=")
        t = pq.read_table(d, columns=["frame", "hop_switch_id", "hop_queue_depth", "hop_latency_ns"]).to_pylist()
        for p in t:
            if p["hop_switch_id"]:
                telemetry[(capture[host], p["frame"])] = list(
                    zip(p["hop_switch_id"], p["hop_queue_depth"], p["hop_latency_ns"]))
    expected = Counter()
    for r in tables["transmissions"]:
        if r["lost"]:
            continue
        for h, (sw, q, lat) in enumerate(telemetry.get((r["down"], r["frame_down"]), [])):
            expected[(r["up"], r["down"]) + path_key(r) + (r["t"], h, sw, q, lat)] += 1
    hops = tables["hops"]
    assert len(hops) > 0
    assert Counter((r["up"], r["down"]) + path_key(r) + (r["t"], r["hop"], r["switch_id"], r["queue_depth"],
                   r["hop_latency_ns"]) for r in hops) == expected
    switches = {s["switch_id"]: s for s in report["fabric"]["switches"]}
    assert Counter(r["switch_id"] for r in hops) == {k: s["hops"] for k, s in switches.items()}
    for sw, s in switches.items():
        mine = [r for r in hops if r["switch_id"] == sw]
        assert max(r["hop_latency_ns"] for r in mine) == s["hop_latency_max_ns"]
        assert max(r["queue_depth"] for r in mine) == s["queue_depth_max"]


def test_the_tables_have_the_documented_columns(job8):
    root = Path(job8["dir"]) / "out" / "tables"
    flow = "rocev2:bool src:string dst:string src_conn:int64 dst_conn:int64"
    key = "ptype:int64 psn:int64 tx_ts:int64 ev:int64 path_seq:int64"
    expected = {
        "matched": f"{flow} {key} state:string ca:int32 cb:int32 ts_a:int64 ts_b:int64 frame_a:int64 frame_b:int64 "
                   "up:int32 down:int32 delta:int64 owd:int64 owd_bucket:int64",
        "lost": f"{flow} {key} capture:int32 ts:int64 frame:int64 fate:string",
        "transmissions": f"up:int32 down:int32 {flow} ev:int64 ts:int64 owd:int64 lost:bool frame_down:int64 "
                         "t:int64",
        "hops": f"up:int32 down:int32 {flow} ev:int64 t:int64 hop:int32 switch_id:int64 queue_depth:int64 "
                "hop_latency_ns:int64",
    }
    for name, columns in expected.items():
        schema = pq.read_schema(root / name / "part-00000.parquet")
        assert " ".join(f"{f.name}:{f.type}" for f in schema) == columns, name


def test_a_retried_bucket_replaces_its_parts(binaries, job8, tmp_path):
    """In ``local[2,2]`` a task may fail once: pass 2's partition 0
    fails after its work (its parts written) and is retried. Each table
    keeps one part per bucket and the same rows as the run without a
    failure."""
    out = tmp_path / "retried"
    env = dict(os.environ, METAROCE_TEST_FAIL_FIRST_ATTEMPT="1")
    done = run([POSTMORTEM, "--master", "local[2,2]", "--analyzer", binaries[0], "--out", out, "--tables",
                Path(job8["dir"]) / "out" / "exports"], env=env)
    assert "partition 0 fails on its first attempt" in done.stderr
    for name in PER_TRANSMISSION:
        parts = sorted(p.name for p in (out / "tables" / name).iterdir())
        assert parts == ["part-00000.parquet", "part-00001.parquet"], name
        again = pq.read_table(out / "tables" / name)
        first = pq.read_table(Path(job8["dir"]) / "out" / "tables" / name)
        assert again.num_rows == first.num_rows > 0, name
        assert again.sort_by([(c, "ascending") for c in again.column_names]).equals(
            first.sort_by([(c, "ascending") for c in first.column_names])), name


def sightings(packets, capture):
    """The columns ``metaroce.Matcher`` reads of one capture's MetaRoCE and
    RoCEv2 rows (``read_packets``' table)."""
    p = packets.filter(pc.is_in(packets["proto"], pa.array(["metaroce", "rocev2"])))
    rocev2 = pc.equal(p["proto"], "rocev2")

    def col(name):
        return pc.fill_null(pc.cast(p[name], pa.int64()), 0)

    return pa.table({
        "rocev2": rocev2, "malformed": p["malformed"], "src": p["src"], "dst": p["dst"],
        "src_conn": pc.if_else(rocev2, 0, col("src_conn")),
        "dst_conn": pc.if_else(rocev2, col("dest_qp"), col("dst_conn")),
        "type_code": col("type_code"), "psn": col("psn"), "tx_ts": col("tx_ts"),
        "ev": pc.if_else(rocev2, col("src_port"), col("ev")), "path_seq": col("path_seq"),
        "ts": col("ts_ns"), "capture": pa.array([capture] * p.num_rows, pa.int32()),
        "frame": col("frame"), "ecn": col("ecn"),
    })


def test_the_row_matcher_matches_what_the_report_counts(job8):
    """``metaroce.Matcher``, the package's matching over Arrow batches in
    capture-time order: its matched rows per path are the report's."""
    import metaroce

    hosts = job8["report"]["hosts"]
    table = pa.concat_tables(sightings(metaroce.read_packets(str(c)), i) for i, c in enumerate(job8["captures"]))
    table = table.sort_by([("ts", "ascending"), ("capture", "ascending"), ("frame", "ascending")])
    matcher = metaroce.Matcher([(h["first_ts_ns"], h["last_ts_ns"]) for h in hosts])
    rows = [matcher.observe(b) for b in table.to_batches(max_chunksize=10_000)] + [matcher.finish()]
    found = pa.Table.from_batches(rows).to_pylist()
    matched = Counter((r["ca"], r["cb"]) + path_key(r) for r in found if r["state"] == "matched")
    assert matched == {k: p["matched"] for k, p in report_paths(job8["report"]).items() if p["matched"]}
    assert sum(matched.values()) > 40_000
    assert {r["state"] for r in found} <= {"matched", "left", "waiting"}
