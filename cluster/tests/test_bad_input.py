"""Bad input: each defect gives a clear message naming the host, and the
rest of the analysis goes on. One run of the job over a 4-host ring where
host-003's clock is 2 s off (no overlap in time with the others, nothing of
it matched within the engine's 1 s window), plus: host-001's export without
its captures table (partial), host-002's export without its packets table
(missing), host-000's export written by another engine (its
engine_version), a capture holding no frames (a host with no traffic),
and a second capture named like the idle one in another folder (a
duplicated host name)."""

import shutil
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import generate, postmortem, run


@pytest.fixture(scope="module")
def bad(binaries, tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    captures = generate(binaries, d / "captures", 4, "--clock-step", "3:2000000000")
    exports = d / "exports"
    run([binaries[0], "export", "--no-progress", "--parquet", exports, *captures])
    shutil.rmtree(exports / "table=captures" / "host=host-001")
    shutil.rmtree(exports / "table=packets" / "host=host-002")
    other = exports / "table=captures" / "host=host-000" / "part-0.parquet"
    t = pq.read_table(other)
    i = t.schema.get_field_index("engine_version")
    pq.write_table(t.set_column(i, "engine_version", pa.array(["0.0.1+0123456789ab"])), other)
    idle = d / "idle" / "host-idle.pcap"
    idle.parent.mkdir()
    # A pcap header (nanosecond magic, Ethernet) and no record.
    idle.write_bytes(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1))
    again = d / "again" / "host-idle.pcap"
    again.parent.mkdir()
    shutil.copy(idle, again)
    report, stderr = postmortem(binaries, d / "out", [exports, idle, again])
    return report, stderr


def has(messages, *words):
    return any(all(w in m for w in words) for m in messages)


def test_each_defect_is_named(bad):
    messages = bad[0]["messages"]
    assert has(messages, "host-001", "no captures table"), messages
    assert has(messages, "host-002", "incomplete", "0 of"), messages
    assert has(messages, "host-idle", "no frames"), messages
    assert has(messages, "host name host-idle given more than once", "host-idle~2"), messages
    assert has(messages, "host-idle~2", "no frames"), messages
    assert has(messages, "host-003", "overlaps no other capture"), messages
    assert has(messages, "host-003", "matched another capture within 1 s", "clock"), messages
    assert has(messages, "host-000", "exported by the engine 0.0.1+0123456789ab", "this job runs"), messages
    # The messages reach the user's terminal too.
    assert "host-003" in bad[1]


def test_the_rest_goes_on(bad):
    report = bad[0]
    hosts = [h["host"] for h in report["hosts"]]
    assert hosts == ["host-000", "host-001", "host-002", "host-003"]
    pairs = {(b["host_a"], b["host_b"]): b for b in report["between_captures"]}
    # host-000 -> host-001 is intact (host-001's span from its packets).
    assert pairs[("host-000", "host-001")]["matched_packets"] > 0
    assert pairs[("host-000", "host-001")]["offset_estimated"]
    # Nothing of host-002 (no packets) or host-003 (2 s off) is matched.
    assert set(pairs) == {("host-000", "host-001")}
    assert "incidents" in report and "fabric" in report
