"""The `tenants` section: each tenant's backends, globs, budgets, rate limit and upstream credentials."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.config.auth import scopes
from gateway.config.model import DISCOVERY_MODES, RateLimitConfig, TenantConfig, TenantLimits
from gateway.config.outbound import tenant_backend_auth
from gateway.config.reader import ConfigError, Section, mapping, read
from gateway.config.rules import default_effect, rules_section, tenant_policy
from gateway.policy import Rule


def tenants_section(root: Section, limits: TenantLimits, gateway_rules: Sequence[Rule]) -> dict[str, TenantConfig]:
    root.seen.add("tenants")
    raw = mapping(root.data.get("tenants"), "tenants")
    return {str(name): read(Section(body, f"tenants.{name}", TenantConfig), _tenant(str(name), limits, gateway_rules))
            for name, body in raw.items()}


def _tenant(name: str, limits: TenantLimits, gateway_rules: Sequence[Rule]) -> Callable[[Section], TenantConfig]:
    def build(s: Section) -> TenantConfig:
        globs = {f"{kind}_{rule}": value for kind in ("tools", "prompts", "resources")
                 for rule, value in _globs(s, kind).items()}
        rules, default = rules_section(s, gateway_wide=False), default_effect(s)
        return TenantConfig(name=name, backends=s.strings("backends"), **globs,
                            rate_limit=_rate_limit(s.section("rate_limit", RateLimitConfig)),
                            backend_headers=_backend_headers(s),
                            limits=read(s.section("limits", TenantLimits), limits_section(limits)),
                            rules=rules, default=default, policy=tenant_policy(name, gateway_rules, rules, default),
                            discovery=_discovery(s), always_listed=s.strings("always_listed"),
                            required_scopes=scopes(s, "required_scopes"), backend_auth=tenant_backend_auth(s))

    return build


def _discovery(s: Section) -> str:
    mode = s.get("discovery", str)
    if mode not in DISCOVERY_MODES:
        raise ConfigError(f"{s.where('discovery')}: must be {' or '.join(DISCOVERY_MODES)}")
    return str(mode)


def limits_section(defaults: TenantLimits) -> Callable[[Section], TenantLimits]:
    """Per-tenant budgets: each key missing here takes its value from `defaults`."""

    def build(s: Section) -> TenantLimits:
        def integer(key: str) -> int:
            value = s.optional_integer(key, minimum=1) if key in s.data else getattr(defaults, key)
            if value is None:
                raise ConfigError(f"{s.where(key)}: must be an integer >= 1")
            return int(value)

        counts = {key: integer(key) for key in ("sessions", "streams", "in_flight", "batch_size")}
        buffered = s.optional_integer("buffered_bytes", minimum=1) if "buffered_bytes" in s.data else None
        return TenantLimits(**counts, buffered_bytes=buffered if buffered is not None else defaults.buffered_bytes)

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
