"""The job's inputs: capture files (analysed by the map step) and export
directories (``table=<name>/host=<host>/part-N.parquet``), on any storage
Spark reads (local, NFS, HDFS, S3), with every defect reported as a message
and the host it concerns left out, never as a failed job."""

import os
import posixpath
import shutil
import subprocess
import tempfile

from . import worker_process


def capture_stem(path):
    """The host name the analyzer gives a capture (its file stem, ``.gz``
    removed first)."""
    name = posixpath.basename(path.rstrip("/"))
    if name.endswith(".gz"):
        name = name[:-3]
    return name.rsplit(".", 1)[0] if "." in name else name


def is_remote(path):
    """Whether ``path`` names its storage by a scheme (``hdfs://``,
    ``s3a://``, ``file://``): Hadoop's or pyarrow's filesystems then reach
    it; a plain path is the local filesystem's."""
    return "://" in path


class Fs:
    """Listing through Hadoop's FileSystem, so HDFS and S3 paths work like
    local ones. A local path (no scheme) is listed and written by the driver's own
    calls: through Hadoop, every entry costs calls to the JVM, about as
    long as the driver's other work before the reduce starts."""

    def __init__(self, spark):
        self.jvm = spark._jvm
        self.conf = spark._jsc.hadoopConfiguration()

    def _fs(self, path):
        p = self.jvm.org.apache.hadoop.fs.Path(path)
        return p, p.getFileSystem(self.conf)

    def is_dir(self, path):
        if not is_remote(path):
            return os.path.isdir(path)
        p, fs = self._fs(path)
        return fs.exists(p) and fs.getFileStatus(p).isDirectory()

    def exists(self, path):
        if not is_remote(path):
            return os.path.exists(path)
        p, fs = self._fs(path)
        return fs.exists(p)

    def write_text(self, path, text):
        if not is_remote(path):
            os.makedirs(posixpath.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            return
        p, fs = self._fs(path)
        out = fs.create(p, True)
        try:
            out.write(bytearray(text.encode()))
        finally:
            out.close()

    def children(self, path):
        """Names of the entries of a directory (empty when missing)."""
        if not is_remote(path):
            return sorted(os.listdir(path)) if os.path.isdir(path) else []
        p, fs = self._fs(path)
        if not fs.exists(p):
            return []
        return sorted(s.getPath().getName() for s in fs.listStatus(p))


def classify(fs, inputs, messages):
    """Splits INPUTs into capture files and export roots."""
    captures, exports = [], []
    for path in inputs:
        if fs.is_dir(path):
            if any(c.startswith("table=") for c in fs.children(path)):
                exports.append(path)
            else:
                messages.append(f"{path}: a directory without table=* folders: not an export, skipped")
        elif fs.exists(path):
            captures.append(path)
        else:
            messages.append(f"{path}: no such file or directory, skipped")
    return captures, exports


def unique_names(named, messages):
    """``[(name, source)]`` -> ``[(unique name, source)]``: a host name given
    twice keeps its first source; the next ones become ``name~2``, ...
    with a message."""
    seen = {}
    out = []
    for name, source in named:
        n = seen.get(name, 0) + 1
        seen[name] = n
        unique = name if n == 1 else f"{name}~{n}"
        if n > 1:
            where = source[1] if isinstance(source, tuple) else source
            messages.append(
                f"host name {name} given more than once ({where}): analysed as {unique}; "
                "check that it is not the same capture twice"
            )
        out.append((unique, source))
    return out


def run_map(spark, analyzer, named, out_dir, messages):
    """The map step as Spark tasks, one per capture: each runs
    ``metaroce-analyze export --parquet`` on its file and moves the host's
    tables into ``out_dir`` under its host name (``named``: ``[(unique host
    name, capture path)]``). ``analyzer`` must be runnable on every executor
    (a shared path, or shipped with ``--files``). Returns the hosts
    exported: their capture points (a capture of switch mirrors holds one
    per mirror session)."""
    tasks = spark.sparkContext.parallelize(named, len(named))

    def export(item):
        worker_process.install()
        host, capture = item
        binary = analyzer
        if not os.path.isabs(binary) and os.path.exists(binary):
            # Shipped with --files into the executor's working directory:
            # a bare name would be looked up on PATH.
            binary = os.path.abspath(binary)
        elif not os.path.isabs(binary):
            from pyspark import SparkFiles

            shipped = SparkFiles.get(os.path.basename(binary))
            binary = shipped if os.path.exists(shipped) else (shutil.which(binary) or binary)
        staging = tempfile.mkdtemp(prefix="metaroce-export-")
        try:
            run = subprocess.run(
                [binary, "export", "--no-progress", "--parquet", staging, capture],
                capture_output=True,
                text=True,
            )
            # The capture's points: the file itself (host=STEM) and, for a
            # collector's capture of switch mirrors, one per mirror session
            # (host=STEM-KIND-SWITCH-sSESSION, analyzer/cli/src/points.rs),
            # each a host of the job named after the capture's host name.
            stem = capture_stem(capture)
            points = set()
            for table in sorted(os.listdir(staging)):
                for child in sorted(os.listdir(os.path.join(staging, table))):
                    point = child[len("host="):]
                    if not child.startswith("host=") or not (point == stem or point.startswith(stem + "-")):
                        continue
                    name = host + point[len(stem):]
                    dst = os.path.join(out_dir, table, f"host={name}")
                    shutil.rmtree(dst, ignore_errors=True)
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    shutil.move(os.path.join(staging, table, child), dst)
                    points.add(name)
            err = run.stderr.strip().splitlines()
            return host, capture, run.returncode, sorted(points), err[-1] if err else ""
        except OSError as e:
            return host, capture, -1, [], str(e)
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    done = []
    for host, capture, code, points, err in tasks.map(export).collect():
        if not points:
            messages.append(f"{capture}: the map step wrote no tables (exit {code}: {err}): host {host} skipped")
            continue
        if code != 0:
            # Exit 2: malformed packets were found (and counted); the tables
            # are complete.
            messages.append(f"{capture}: metaroce-analyze exited {code} ({err}); its tables are used")
        done += points
    return done


def host_dirs(fs, root, table):
    """``{host: path}`` of a table of an export root."""
    base = posixpath.join(root, f"table={table}")
    out = {}
    for child in fs.children(base):
        if child.startswith("host="):
            out[child[len("host="):]] = posixpath.join(base, child)
    return out

