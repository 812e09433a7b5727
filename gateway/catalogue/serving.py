"""`server.ready_requires: any_backend`: the readiness check that needs at least one backend serving."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gateway.health import ReadinessCheck

if TYPE_CHECKING:
    from gateway.catalogue.refresher import CatalogueService


def any_backend_serving(catalogue: CatalogueService) -> ReadinessCheck:
    """Not ready while no configured backend answered its last tools/list (the backends of the
    catalogue's config at each check: a reload may change them).

    The reason names each backend's state only; why it is down (which may quote its stderr)
    is for `/admin/backends` and the logs, not the public /readyz body.
    """

    async def check() -> str | None:
        snapshots = catalogue.current.snapshots
        backends = [name for name, _ in catalogue.order]
        states = {name: snapshots[name].status if name in snapshots else "pending" for name in backends}
        if any(state == "ok" for state in states.values()):
            return None
        if not states:
            return "none configured"
        return "none serving (" + ", ".join(f"{name} {state}" for name, state in states.items()) + ")"

    return check
