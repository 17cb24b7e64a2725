"""The engine's latency summary (analyzer/src/engine/hist.rs), computed
from exact ranks instead of a histogram.

The engine records samples in an HdrHistogram with 3 significant digits
(lowest discernible value 1): a value ``v`` falls in the bucket of width
``2**b`` with ``b = max(0, bit_length(v | 2047) - 11)``. A percentile is the
bucket of the sample of rank ``max(1, ceil(q * n))``, reported as the
exact max or min when its bucket holds them, else as the bucket's lowest
value (clamped to min..max). Given those rank samples, :func:`summary`
returns the same numbers as ``Hist::summary``.
"""

import math

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999))


def rank(q, n):
    """1-based rank of the sample whose bucket is the ``q`` quantile."""
    return max(1, math.ceil(q * float(n)))


def bucket(v):
    """(lowest, highest) value equivalent to ``v``."""
    b = max(0, (v | 2047).bit_length() - 11)
    lo = (v >> b) << b
    return lo, lo + (1 << b) - 1


def summary(count, lo, hi, at_rank):
    """``{"count", "min", "p50", "p90", "p99", "p999", "max"}`` of
    ``count`` samples from ``lo`` to ``hi``; ``at_rank[r]`` is the sample of
    rank ``r`` (1-based, in ascending order) for every rank of
    :data:`QUANTILES`."""
    out = {"count": 0, "min": 0, "p50": 0, "p90": 0, "p99": 0, "p999": 0, "max": 0}
    if not count:
        return out
    out.update(count=count, min=lo, max=hi)
    for name, q in QUANTILES:
        b_lo, b_hi = bucket(at_rank[rank(q, count)])
        if b_lo <= hi <= b_hi:
            out[name] = hi
        elif b_lo <= lo <= b_hi:
            out[name] = lo
        else:
            out[name] = min(max(b_lo, lo), hi)
    # Key order of the engine's Summary.
    return {k: out[k] for k in ("count", "min", "p50", "p90", "p99", "p999", "max")}
