"""The matcher service's metrics, shared by every ``bexdb serve`` worker process.

Counters and histograms are prometheus_client's, in its multiprocess mode: each worker
adds to memory-mapped files in ``PROMETHEUS_MULTIPROC_DIR`` (a few hundred nanoseconds per
update) and whichever worker answers ``/metrics`` or ``/stats`` sums them.  That variable
must be set before this module is imported (``tools.serve`` does it).  The store's own
figures (subscriptions, bytes on disk) are read at scrape time, not kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, multiprocess
from prometheus_client.core import GaugeMetricFamily, Metric

REQUESTS = Counter("bexdb_requests", "HTTP requests answered", ["method", "route", "code"])
EVENTS = Counter("bexdb_events_matched", "Events matched")
REJECTED = Counter("bexdb_events_rejected", "Events rejected (malformed or wrongly typed)")
MATCHES = Counter("bexdb_matches_returned", "Subscription ids returned by matches")
LATENCY = Histogram(
    "bexdb_match_seconds",
    "Time to match one validated event",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0),
)
CANDIDATES = Histogram(
    "bexdb_event_candidates",
    "Clauses checked per event",
    buckets=(0, 10, 100, 1_000, 10_000, 100_000, 1_000_000),
)
PAGES = Histogram(
    "bexdb_event_pages",
    "Index pages read per event",
    buckets=(1, 10, 100, 1_000, 10_000, 100_000),
)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _StoreCollector:
    """Gauges read from the store when scraped: subscriptions and bytes on disk."""

    def __init__(self, subscriptions: int, store_bytes: int) -> None:
        self.figures = (subscriptions, store_bytes)

    def collect(self) -> Iterator[Metric]:
        subs, size = self.figures
        yield GaugeMetricFamily("bexdb_subscriptions", "Subscriptions in the store", value=subs)
        yield GaugeMetricFamily("bexdb_store_bytes", "Bytes of the store on disk", value=size)


def _registry(subscriptions: int, store_bytes: int) -> CollectorRegistry:
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)
    registry.register(_StoreCollector(subscriptions, store_bytes))
    return registry


def prometheus_text(subscriptions: int, store_bytes: int) -> bytes:
    """``/metrics``: every worker's counters summed, in Prometheus text format."""
    return generate_latest(_registry(subscriptions, store_bytes))


def as_json(subscriptions: int, store_bytes: int) -> dict[str, Any]:
    """``/stats``: the same figures as ``/metrics``, as one JSON object.

    Unlabelled metrics map to a number, labelled ones to a list of label sets with a
    ``value``, histograms to ``count``, ``sum``, ``mean`` and cumulative ``buckets``.
    """
    out: dict[str, Any] = {}
    for family in _registry(subscriptions, store_bytes).collect():
        if family.type == "histogram":
            h: dict[str, Any] = {"count": 0, "sum": 0.0, "buckets": {}}
            for s in family.samples:
                if s.name.endswith("_bucket"):
                    h["buckets"][s.labels["le"]] = _number(s.value)
                elif s.name.endswith("_count"):
                    h["count"] = _number(s.value)
                elif s.name.endswith("_sum"):
                    h["sum"] = s.value
            h["mean"] = h["sum"] / h["count"] if h["count"] else None
            out[family.name] = h
            continue
        samples = [s for s in family.samples if not s.name.endswith("_created")]
        if any(s.labels for s in samples):
            out[family.name] = [{**s.labels, "value": _number(s.value)} for s in samples]
        else:
            out[family.name] = _number(samples[0].value) if samples else 0
    return out


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value
