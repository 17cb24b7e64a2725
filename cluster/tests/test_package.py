"""The `metaroce` package against the command line on the same captures:
``read_packets`` gives the `export` packets table (columns, order, values),
``report`` what ``report --json`` prints, and the Arrow tables work in
polars."""

import polars as pl
import pytest
import pyarrow as pa
import pyarrow.parquet as pq

import metaroce
from conftest import run


def test_read_packets_is_the_export_packets_table(captures8, binaries, tmp_path):
    capture = captures8["captures"][0]
    run([binaries[0], "export", "--no-progress", "--parquet", tmp_path, capture])
    host = capture.stem
    exported = pq.read_table(tmp_path / "table=packets" / f"host={host}")
    table = metaroce.read_packets(capture)
    assert table.num_rows == exported.num_rows > 10_000
    assert table.column_names == exported.column_names
    for name in table.column_names:
        assert table.column(name).to_pylist() == exported.column(name).to_pylist(), name
    # The telemetry lists are there (the scenario's switches stamp them).
    assert table.column("hop_switch_id").drop_null().to_pylist()


def test_report_is_report_json(captures8):
    assert metaroce.report(captures8["captures"]) == captures8["single"]
    # Options are the command's.
    one = metaroce.report(captures8["captures"][:1], stall_threshold="2ms")
    assert one["capture"]["files"] == 1


def test_bad_input_is_named(tmp_path):
    missing = tmp_path / "nope.pcap"
    for call in (lambda: metaroce.read_packets(missing), lambda: metaroce.report([missing])):
        try:
            call()
        except OSError as e:
            assert "nope.pcap" in str(e)
        else:
            raise AssertionError("a missing capture must raise")
    try:
        metaroce.report([missing], stall_threshold="3 parsecs")
    except ValueError as e:
        assert "parsecs" in str(e)
    else:
        raise AssertionError("a bad duration must raise")


def test_polars_reads_the_table_without_copying_rows(captures8):
    df = pl.from_arrow(metaroce.read_packets(captures8["captures"][1]))
    per_proto = df.group_by("proto").len()
    assert per_proto["proto"].to_list() == ["metaroce"]
    assert df["ts_ns"].dtype == pl.UInt64


def test_the_binary_and_the_wheel_run_one_engine(captures8, binaries, tmp_path):
    """The export records its engine; the wheel built from the same sources
    has the same one (the Spark job names a host whose differs)."""
    run([binaries[0], "export", "--no-progress", "--parquet", tmp_path, captures8["captures"][0]])
    captures = pq.read_table(tmp_path / "table=captures")
    version = metaroce.engine_version()
    assert version.startswith(metaroce.__version__ + "+") and len(version) > len(metaroce.__version__) + 8
    assert captures.column("engine_version").to_pylist() == [version]


def shard(capture, buckets, host=0):
    """``metaroce.shard`` of a capture's packets (as host ``host``), their
    columns as the job casts them (between._packets: int64, as Spark's
    longs)."""
    table = metaroce.read_packets(capture)

    def as_job(field):
        if pa.types.is_integer(field.type):
            return pa.int64()
        if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
            return pa.list_(pa.int64())
        return field.type

    columns = {f.name: table.column(f.name).cast(as_job(f)) for f in table.schema}
    return metaroce.shard(pa.table(columns).to_batches(), host, buckets)


def test_bucket_blobs_are_packed_and_a_damaged_one_is_named(captures8):
    """``shard``'s blobs cross Spark LZ4-compressed; the bucket step
    unpacks them, and bytes that are not such a blob (cut, or raw) raise
    an error that names them, never a crash."""
    blobs = shard(captures8["captures"][0], 2)
    assert [b for b, _ in blobs] == [0, 1]
    for _, blob in blobs:
        # An LZ4 block of the encoded blob: its length in front, smaller.
        assert len(blob) - 4 < int.from_bytes(blob[:4], "little"), "compressed"
    spans = [(0, 2**63)]
    sums, kept = metaroce.match_paths([blobs[0][1]], spans, [0])
    assert kept
    # Cut short; raw bytes whose first four announce 861 MB (refused
    # before any allocation); nothing at all.
    for damaged in (blobs[0][1][: len(blobs[0][1]) // 2], b"MRS4 raw, not packed", b""):
        try:
            metaroce.match_paths([damaged], spans, [0])
        except ValueError as e:
            assert "a bucket blob does not decode" in str(e) and "compressed bucket blob" in str(e), e
        else:
            raise AssertionError("a damaged blob must raise")


def test_a_kept_bucket_is_the_same_in_its_file_and_a_missing_file_is_named(captures8, tmp_path):
    """``match_paths(..., kept_file=)`` writes the kept bucket there (and
    returns no bytes); pass 2 reads the file as it reads the bytes, and a
    file that is not there raises an error that names it."""
    blobs = [blob for _, blob in shard(captures8["captures"][0], 1)]
    spans = [(0, 2**63)]
    sums, kept = metaroce.match_paths(blobs, spans, [0])
    path = tmp_path / "kept"
    file_sums, nothing = metaroce.match_paths(blobs, spans, [0], kept_file=str(path))
    assert nothing is None and file_sums == sums and path.read_bytes() == kept
    paths = metaroce.merge_paths([sums])
    assert metaroce.match_partials(str(path), spans, paths, [0], []) == metaroce.match_partials(kept, spans, paths,
                                                                                                   [0], [])
    with pytest.raises(OSError, match="missing-kept"):
        metaroce.match_partials(str(tmp_path / "missing-kept"), spans, paths, [0], [])


def test_pass_2_reads_the_digest_as_it_reads_every_row(captures8):
    """Pass 1 keeps what pass 2 reads (the digest) unless the rows are
    asked for (``rows=True``, for the tables): both give the same
    partials; the tables refuse a digest, naming the option; a digest cut
    short is named, never a crash."""
    blobs = [blob for _, blob in shard(captures8["captures"][0], 1)]
    blobs += [blob for _, blob in shard(captures8["captures"][1], 1, host=1)]
    spans = [(0, 2**63), (0, 2**63)]
    sums, digest = metaroce.match_paths(blobs, spans, [0, 1])
    same_sums, rows = metaroce.match_paths(blobs, spans, [0, 1], rows=True)
    assert same_sums == sums and len(metaroce.offsets(spans, sums)) == 1
    assert len(digest) < 0.75 * len(rows)
    paths = metaroce.merge_paths([sums])
    windows = [(0, 2**62)]
    assert metaroce.match_partials(digest, spans, paths, [0, 0], windows) == metaroce.match_partials(
        rows, spans, paths, [0, 0], windows)
    assert metaroce.match_tables(rows, spans, paths, [0, 0])
    with pytest.raises(ValueError, match="rows=True"):
        metaroce.match_tables(digest, spans, paths, [0, 0])
    with pytest.raises(ValueError, match="a kept bucket does not decode: .*truncated"):
        metaroce.match_partials(digest[: len(digest) // 2], spans, paths, [0, 0], windows)
    # Cut anywhere, or one byte changed in its header and counts: an error
    # that says so, never a crash.
    for cut in range(0, len(digest), len(digest) // 97):
        with pytest.raises(ValueError, match="a kept bucket does not decode"):
            metaroce.match_partials(digest[:cut], spans, paths, [0, 0], windows)
    for at in range(0, 64):
        damaged = bytearray(digest)
        damaged[at] ^= 0xFF
        try:
            metaroce.match_partials(bytes(damaged), spans, paths, [0, 0], windows)
        except ValueError:
            pass
