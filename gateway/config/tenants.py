"""The `tenants` section: each tenant's backends, globs, budgets, rate limit and upstream credentials."""

from __future__ import annotations

from collections.abc import Callable

from gateway.config.model import RateLimitConfig, TenantConfig, TenantLimits
from gateway.config.reader import ConfigError, Section, mapping, read


def tenants_section(root: Section, limits: TenantLimits) -> dict[str, TenantConfig]:
    root.seen.add("tenants")
    raw = mapping(root.data.get("tenants"), "tenants")
    return {str(name): read(Section(body, f"tenants.{name}", TenantConfig), _tenant(str(name), limits))
            for name, body in raw.items()}


def _tenant(name: str, limits: TenantLimits) -> Callable[[Section], TenantConfig]:
    def build(s: Section) -> TenantConfig:
        globs = {f"{kind}_{rule}": value for kind in ("tools", "prompts", "resources")
                 for rule, value in _globs(s, kind).items()}
        return TenantConfig(name=name, backends=s.strings("backends"), **globs,
                            rate_limit=_rate_limit(s.section("rate_limit", RateLimitConfig)),
                            backend_headers=_backend_headers(s),
                            limits=read(s.section("limits", TenantLimits), limits_section(limits)))

    return build


def limits_section(defaults: TenantLimits) -> Callable[[Section], TenantLimits]:
    """Per-tenant budgets: each key missing here takes its value from `defaults`."""

    def build(s: Section) -> TenantLimits:
        def integer(key: str) -> int:
            value = s.optional_integer(key, minimum=1) if key in s.data else getattr(defaults, key)
            if value is None:
                raise ConfigError(f"{s.where(key)}: must be an integer >= 1")
            return int(value)

        return TenantLimits(**{key: integer(key) for key in ("sessions", "streams", "in_flight", "batch_size")})

    return build


def _globs(s: Section, kind: str) -> dict[str, tuple[str, ...]]:
    """A tenant's `{kind: {allow, deny}}` globs."""
    section = s.section(kind, TenantConfig)
    globs = {rule: section.strings(rule, field=f"{kind}_{rule}") for rule in ("allow", "deny")}
    section.done()
    return globs


def _backend_headers(s: Section) -> dict[str, dict[str, str]]:
    s.seen.add("backend_headers")
    headers = mapping(s.data.get("backend_headers"), s.where("backend_headers"))
    return {str(b): Section({str(b): h}, s.where("backend_headers")).header_map(str(b)) for b, h in headers.items()}


def _rate_limit(s: Section) -> RateLimitConfig | None:
    if not s.data:
        return None
    return read(s, lambda limit: RateLimitConfig(requests_per_second=limit.number("requests_per_second", minimum=0.001),
                                                 burst=limit.integer("burst", minimum=1)))
