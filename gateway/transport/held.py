"""Replies written to clients that have not read them yet, counted per tenant (`limits.buffered_bytes`).

A reply handed to a client connection stays in the gateway's memory until the client reads it; a
client that reads nothing keeps it until the write deadline cuts the connection. Without a bound
per tenant, one tenant's clients could pin as much memory as its in-flight budget times the
largest reply. So a large reply is counted from the moment it is written until the client has
taken it (or the connection is gone), and while a tenant holds its budget or more, its new
requests are refused (429, or -32603 `limit` in a batch); other tenants are not touched.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from gateway.config import TenantConfig

LARGE_REPLY = 64 * 1024
"""Replies from this size on are counted. A smaller one fits the transport's own write buffer (aiohttp
does not wait for the client to take it), and there are no more of them than connections."""
MACHINE_SHARE = 16
"""A tenant's default budget: this fraction of the memory the process may use."""
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is read (cgroup v2, then v1)."""


@cache
def default_budget() -> int:
    """`limits.buffered_bytes` left at null: a share of the machine (or the container's limit)."""
    return max(LARGE_REPLY, machine_memory() // MACHINE_SHARE)


def machine_memory() -> int:
    """The memory this process may use: its cgroup's limit where there is one, else the physical memory."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_LIMITS:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            return min(int(text), physical)
    return physical


def budget_of(tenant: TenantConfig) -> int:
    return tenant.limits.buffered_bytes or default_budget()


class HeldReplies:
    """Bytes of counted replies not yet taken by their clients, per tenant name."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held: dict[str, int] = {}  # empty while nothing large is being written: one check per request

    def over(self, tenant: TenantConfig) -> bool:
        """Whether the tenant holds its budget or more (so a new request of its is refused)."""
        return self.held.get(tenant.name, 0) >= budget_of(tenant)

    @contextmanager
    def holding(self, tenant: str, size: int) -> Iterator[None]:
        """Count `size` bytes against `tenant` for the duration of the block (the write of one reply)."""
        self.held[tenant] = self.held.get(tenant, 0) + size
        try:
            yield
        finally:
            left = self.held[tenant] - size
            if left:
                self.held[tenant] = left
            else:
                del self.held[tenant]
