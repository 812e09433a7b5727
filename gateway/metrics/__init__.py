"""Prometheus metrics: definitions and hooks (`registry`), hot-path batching (`batch`), `/metrics` (`endpoint`)."""

from gateway.metrics.batch import EXEMPLAR_INTERVAL, FLUSH_SECONDS, LATENCY_BUCKETS, exemplar
from gateway.metrics.endpoint import collected, render, setup_metrics
from gateway.metrics.registry import (
    MAX_AUTH_REASONS,
    MULTIPROC_ENV,
    OTHER,
    SERVER_ERROR_OUTCOMES,
    Metrics,
    multiprocess_dir_from_env,
)

__all__ = [
    "EXEMPLAR_INTERVAL", "FLUSH_SECONDS", "LATENCY_BUCKETS", "MAX_AUTH_REASONS", "MULTIPROC_ENV", "OTHER",
    "SERVER_ERROR_OUTCOMES", "Metrics", "collected", "exemplar", "multiprocess_dir_from_env", "render", "setup_metrics",
]
