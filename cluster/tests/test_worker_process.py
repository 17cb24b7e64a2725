"""The reduce's Python worker settings (metaroce_cluster/worker_process.py),
each checked in a fresh interpreter: they change the process for good."""

import subprocess
import sys
import textwrap
from pathlib import Path

CLUSTER = Path(__file__).resolve().parents[1]


def python(code, tmp_path, *argv):
    """Runs ``code`` with arguments ``argv`` in a fresh interpreter of this
    environment, with the cluster package importable; returns its
    stdout."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *argv], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(CLUSTER)})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_zip_archive_is_read_again_only_when_it_changed(tmp_path):
    """After ``install``, invalidating the import caches (as PySpark does
    before every task) reads no unchanged archive again, and an archive
    that changed is read again: a module added to it imports."""
    out = python("""
        import importlib, os, sys, zipfile, zipimport
        from metaroce_cluster import worker_process

        def archive(*modules):
            with zipfile.ZipFile("mods.zip", "w") as z:
                for m in modules:
                    z.writestr(f"{m}.py", f"NAME = {m!r}\\n")

        archive("first")
        sys.path.insert(0, os.path.abspath("mods.zip"))
        import first
        reads = []
        read_directory = zipimport._read_directory
        zipimport._read_directory = lambda path: reads.append(path) or read_directory(path)
        worker_process.install()
        for _ in range(3):
            importlib.invalidate_caches()
        unchanged = len(reads)
        archive("first", "second_module_with_a_longer_name")
        importlib.invalidate_caches()
        import second_module_with_a_longer_name as second
        print(sys.version_info >= (3, 12), unchanged, len(reads), second.NAME)
    """, tmp_path)
    lazy, unchanged, after_change, name = out.split()
    assert name == "second_module_with_a_longer_name"
    if lazy == "True":
        # Python 3.12 reads an archive again only when it is next used.
        assert int(unchanged) == 0
    else:
        assert (int(unchanged), int(after_change)) == (0, 1)


def test_freed_memory_stays_in_the_process(tmp_path):
    """A freed 256 MiB buffer goes back to the kernel by default (glibc
    maps it on its own); after ``install`` it stays, for the next
    allocation to reuse without faulting its pages in again."""
    code = """
        import sys
        from metaroce_cluster import worker_process

        def resident():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * 4096

        if sys.argv[-1] == "install":
            worker_process.install()
        buffer = bytearray(256 << 20)
        before = resident()
        del buffer
        print(before - resident())
    """
    for setting, kept in (("default", False), ("install", True)):
        returned = int(python(code, tmp_path, setting))
        if kept:
            assert returned < 16 << 20, f"{setting}: {returned} bytes went back to the kernel"
        else:
            assert returned > 200 << 20, f"{setting}: only {returned} bytes went back to the kernel"


def test_the_imports_objects_are_out_of_the_collectors_sight(tmp_path):
    """After ``install``, the objects alive (the imports') are frozen: a
    collection of the oldest generation no longer walks them."""
    out = python("""
        import gc
        from metaroce_cluster import worker_process

        before = gc.get_freeze_count()
        worker_process.install()
        print(before, gc.get_freeze_count())
    """, tmp_path)
    before, after = map(int, out.split())
    assert before == 0 and after > 1000


def test_a_reserved_heap_is_reused_without_page_faults(tmp_path):
    """After ``reserve_heap(256 MiB)``, a 200 MiB buffer written whole
    faults (almost) no page in; without it, every page of it faults."""
    code = """
        import resource, sys
        from metaroce_cluster import worker_process

        worker_process.install()
        if sys.argv[-1] == "reserve":
            worker_process.reserve_heap(256 << 20)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        buffer = bytearray(200 << 20)
        print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
    faults = {setting: int(python(code, tmp_path, setting)) for setting in ("none", "reserve")}
    # 200 MiB is 51,200 pages of 4 KiB, or 100 huge pages where the
    # kernel gives them to any allocation.
    assert faults["none"] >= 100, faults
    assert faults["reserve"] < faults["none"] / 10, faults


def test_a_capped_worker_reserves_nothing_and_goes_on(tmp_path):
    """A worker whose address space is capped below the reservation (as
    ``spark.executor.pyspark.memory`` caps it) reserves nothing, without
    an error, and can still allocate what fits."""
    out = python("""
        import resource
        from metaroce_cluster import worker_process

        worker_process.install()
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
        worker_process.reserve_heap(8 << 30)
        buffer = bytearray(64 << 20)
        print(worker_process._reserved, len(buffer))
    """, tmp_path)
    assert out.split() == ["0", str(64 << 20)]
