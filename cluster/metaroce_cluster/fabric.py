"""The job's one clock and its stall timeline (small: per capture pair,
per stall), on the driver. The fabric views and the culprits' sums are
the engine's (``metaroce.match_partials`` and ``metaroce.assemble``,
python/src/buckets.rs and assemble.rs; cluster/README.md defines each
field).

Every time here is on one clock, the reference capture's (index 0): a
capture's times are moved by the offsets estimated between capture pairs,
chained along the pairs that exchanged traffic (a host whose clock cannot
be chained to the reference keeps its own, and is named in ``messages``).
Incidents are the stalls of all hosts (the engine's, from the ``packets``
table) aligned on that clock and grouped while they overlap.
"""

from collections import deque



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


def stalls(per_capture, name, to_ref):
    """Each stall of each capture (``per_capture``: ``[(capture,
    [(src, dst, src_conn, dst_conn, start, end)])]`` on the capture's
    clock, capture -1 for hosts left out), on the reference clock."""
    out = []
    for c, rows in per_capture:
        if c < 0:
            continue
        shift = to_ref.get(c, 0)
        for src, dst, src_conn, dst_conn, start, end in rows:
            out.append({"capture": c, "host": name[c], "src": src, "dst": dst, "src_conn": src_conn,
                        "dst_conn": dst_conn, "start_own": start, "end_own": end, "start": start - shift,
                        "end": end - shift})
    return out


def _nulls_first(values):
    return tuple((v is not None, v) for v in values)


def incidents(stall_rows):
    """Stalls grouped into incidents: intervals on the reference clock
    that overlap (each stall gets its ``incident``). Returns one summary
    per incident: ``incident, start_ns, end_ns, stalls, hosts,
    connections, duration_ns``."""
    out = []
    end = None
    for s in sorted(stall_rows, key=lambda s: (s["start"], s["end"], s["capture"])):
        if end is None or s["start"] > end:
            out.append({"incident": len(out), "start_ns": s["start"], "end_ns": s["end"], "stalls": 0,
                        "hosts": set(), "connections": set()})
            end = s["end"]
        i = out[-1]
        end = max(end, s["end"])
        s["incident"] = i["incident"]
        i["start_ns"], i["end_ns"] = min(i["start_ns"], s["start"]), max(i["end_ns"], s["end"])
        i["stalls"] += 1
        i["hosts"].add(s["host"])
        i["connections"].add((s["host"], s["src"], s["dst"], s["src_conn"], s["dst_conn"]))
    for i in out:
        i["hosts"] = sorted(i["hosts"])
        i["connections"] = [dict(zip(("host", "src", "dst", "src_conn", "dst_conn"), c))
                            for c in sorted(i["connections"], key=_nulls_first)]
        i["duration_ns"] = i["end_ns"] - i["start_ns"]
    return out
