"""Reading metrics back: from the app's own registry, or by parsing a real /metrics scrape."""

from __future__ import annotations

from typing import Any

import aiohttp
from conftest import SCRAPE_TOKEN
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from gateway import keys

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def registry_of(app: Any) -> CollectorRegistry:
    return app[keys.METRICS].registry


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """A sample's value, 0 when the series does not exist (a counter nobody touched)."""
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def samples_of(text: str) -> Samples:
    """Every sample of a Prometheus text exposition, keyed by name and label set."""
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


SCRAPE = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}


def sample(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def scrape(url: str, accept: str | None = None) -> tuple[str, str]:
    """The body and content type of one scrape (with the test configs' scrape token)."""
    headers = {"Accept": accept, **SCRAPE} if accept else dict(SCRAPE)
    async with aiohttp.ClientSession() as http, http.get(url, headers=headers) as response:
        assert response.status == 200, response.status
        return await response.text(), response.headers["Content-Type"]
