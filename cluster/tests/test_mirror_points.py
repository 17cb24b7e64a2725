"""A collector's capture of two switch mirror sessions: each session is a
capture point (analyzer/cli/src/points.rs), named by the capture's host,
the mirror's kind, the switch address and the session, and the job
matches the two points like ``report --json`` of the same capture."""

from conftest import ROOT, postmortem, run


def test_mirror_sessions_are_named_capture_points(binaries, tmp_path):
    capture = ROOT / "fixtures" / "generated" / "mirror_erspan3.pcap"
    single = __import__("json").loads(run([binaries[0], "report", "--json", "--no-progress", capture]).stdout)
    report, _ = postmortem(binaries, tmp_path / "out", [capture])
    assert [h["host"] for h in report["hosts"]] == [
        "mirror_erspan3-erspan3-192.0.2.1-s1", "mirror_erspan3-erspan3-192.0.2.2-s2"]
    assert report["messages"] == []
    between = [{k: v for k, v in b.items() if k not in ("host_a", "host_b")} for b in report["between_captures"]]
    assert single["between_captures"] and between == single["between_captures"]
    assert (report["between_captures"][0]["host_a"], report["between_captures"][0]["host_b"]) == (
        "mirror_erspan3-erspan3-192.0.2.1-s1", "mirror_erspan3-erspan3-192.0.2.2-s2")
