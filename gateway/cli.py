"""The `mcp-gateway` command: serve, check-config, token, catalogue, stdio, policy, audit, pins, init."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jwt

from gateway.audit.commands import add_commands as add_audit_commands
from gateway.config import Config, ConfigError, HttpBackend, load_config
from gateway.pins_command import add_pins_parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.run is _init:
        return _init(args)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"config error: {exc}", file=sys.stderr)
        return 1
    if args.preflight and _refuse(config):
        return 1
    return int(args.run(config, args) or 0)


def _refuse(config: Config) -> bool:
    """Print what would fail at start, one line each; True when there is anything."""
    from gateway.preflight import problems

    found = problems(config)
    for problem in found:
        print(f"config error: {problem}", file=sys.stderr)
    return bool(found)


def parser() -> argparse.ArgumentParser:
    """The command line (docs/generate.py writes docs/reference/cli.md from it)."""
    parser = argparse.ArgumentParser(prog="mcp-gateway", description="Multi-tenant MCP gateway")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, run: Any, help_text: str, *, preflight: bool = True) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("--config", metavar="PATH", help="config file (default: the bundled demo config)")
        sub.set_defaults(run=run, preflight=preflight)  # preflight: refuse what would fail at start
        return sub

    serve = command("serve", _serve, "run the HTTP gateway")
    serve.add_argument("--host", help="address to listen on (overrides server.host)")
    serve.add_argument("--port", type=int, help="port to listen on (overrides server.port)")
    serve.add_argument("--workers", type=int, default=1,
                       help="processes sharing the port (needs store.redis_url to share sessions)")
    command("check-config", _check_config, "validate the config and print a summary")
    token = command("token", _token, "mint a development token with the HS secret", preflight=False)
    token.add_argument("--tenant", required=True, help="the tenant claim")
    token.add_argument("--sub", default="dev", help="the subject claim")
    token.add_argument("--scope", default="", help='space-separated scopes, e.g. "mcpgw:admin"')
    token.add_argument("--ttl", type=int, default=3600, help="seconds until the token expires")
    token.add_argument("--groups", default="", help="comma-separated groups (the groups claim), e.g. support,leads")
    catalogue = command("catalogue", _catalogue, "print the merged catalogue")
    catalogue.add_argument("--tenant", help="only what this tenant sees")
    stdio = command("stdio", _stdio, "serve one local client over stdin/stdout")
    stdio.add_argument("--server", metavar="NAME", help="serve this virtual server (under `servers:`) instead")
    policy = commands.add_parser("policy", help="ask the policy rules", description="ask the policy rules")
    explain = policy.add_subparsers(required=True, metavar="SUBCOMMAND").add_parser(
        "explain", help="what the rules give one caller", description=(
            "print, as JSON, the rule that decides a tool for one caller and the inputSchema it is shown "
            "(with --args, what a call with those arguments meets), or with --list every item and its rule"))
    explain.add_argument("--config", metavar="PATH", help="config file (default: the bundled demo config)")
    explain.add_argument("--tenant", required=True, help="the caller's tenant")
    explain.add_argument("--sub", required=True, help="the caller's subject")
    explain.add_argument("--groups", default="", help="comma-separated groups")
    explain.add_argument("--scopes", default="", help="comma- or space-separated scopes")
    explain.add_argument("--claims", default="{}", help="the token's other claims, as a JSON object")
    target = explain.add_mutually_exclusive_group(required=True)
    target.add_argument("--tool", help="the exposed tool name")
    target.add_argument("--list", action="store_true", help="every tool, prompt, resource and template")
    explain.add_argument("--args", help="a call's arguments, as a JSON object (with --tool)")
    explain.add_argument("--server", metavar="NAME",
                         help="through this virtual server (under `servers:`): --tool names its tool")
    explain.set_defaults(run=_explain, preflight=True)
    add_audit_commands(commands)
    add_pins_parser(commands, _with_catalogue)
    init = commands.add_parser("init", help="write a starter config file",
                               description="write a starter config file and print its two new API keys")
    init.add_argument("path", nargs="?", default="gateway.yaml", help="where (default: ./gateway.yaml)")
    init.add_argument("--force", action="store_true", help="overwrite the file if it exists")
    init.set_defaults(run=_init)
    return parser


def _init(args: argparse.Namespace) -> int:
    """Write the starter config with two new API keys (only their hashes go in the file)."""
    import hashlib
    import secrets
    from importlib.resources import files
    from pathlib import Path

    path = Path(args.path)
    if path.exists() and not args.force:
        print(f"error: {path} exists; use --force to overwrite it", file=sys.stderr)
        return 1
    keys = {name: f"mgw_{secrets.token_urlsafe(32)}" for name in ("USER", "ADMIN")}
    text = (files("gateway") / "starter_config.yaml").read_text(encoding="utf-8")
    for name, key in keys.items():
        text = text.replace(f"@{name}_KEY_SHA256@", hashlib.sha256(key.encode()).hexdigest())
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot write {path} ({exc.strerror})", file=sys.stderr)
        return 1
    print(f"wrote {path}\nAPI key of tenant team (shown only now): {keys['USER']}\n"
          f"admin key (tenant ops, scope mcpgw:admin): {keys['ADMIN']}\n"
          f"next: mcp-gateway check-config --config {path} && mcp-gateway serve --config {path}")
    return 0


def _serve(config: Config, args: argparse.Namespace) -> int:
    if args.workers > 1:
        from gateway.lifecycle import share_metrics_between_processes

        share_metrics_between_processes()  # before the server's imports load prometheus_client
    from gateway.supervisor import serve

    return serve(config, host=args.host, port=args.port, workers=args.workers, source=_source(args.config))


def _source(path: str | None) -> Callable[[], Config]:
    """How a reload reads the config: as `serve` did, the start-up checks included."""
    from gateway.preflight import problems

    def load() -> Config:
        config = load_config(path)
        found = problems(config)
        if found:
            raise ConfigError("; ".join(str(problem) for problem in found))
        return config

    return load


def _check_config(config: Config, args: argparse.Namespace) -> int:
    print(f"ok: {config.server.host}:{config.server.port}{config.server.path}")
    print(f"store: {'redis' if config.store.redis_url else 'memory'}")
    for backend in config.backends:
        target = backend.url if isinstance(backend, HttpBackend) else " ".join(backend.command)
        print(f"backend {backend.name} ({backend.transport}, namespace {backend.namespace!r}): {target}")
    for tenant in config.tenants.values():
        rules = f", {len(tenant.policy.rules)} rules, default {tenant.default}" if tenant.policy.rules else ""
        print(f"tenant {tenant.name}: backends {', '.join(tenant.backends)}{rules}")
    for warning in _rule_warnings(config):
        print(f"warning: {warning}")
    return 0


def _rule_warnings(config: Config) -> list[str]:
    """Rules that can never apply, rule globs that match no name (judged per tenant, said once), and
    virtual server items no tenant they admit could be listed."""
    from gateway.catalogue.server_lint import unserved_items
    from gateway.policy.lint import shadowed, unmatched_globs

    found: dict[str, None] = {}
    for tenant in config.tenants.values():
        namespaces = {b.name: b.namespace for b in config.backends
                      if "*" in tenant.backends or b.name in tenant.backends}
        for rule, earlier in shadowed(tenant.policy.rules):
            found[f"{rule.where} ({rule.name}) never applies in tenant {tenant.name}: {earlier.where} "
                  f"({earlier.name}) comes first and covers every caller and item it names"] = None
        for rule in tenant.policy.rules:
            for where, glob in unmatched_globs(rule, namespaces, config.catalogue.separator):
                found[f"{where}: {glob!r} matches no name of tenant {tenant.name}'s backends"] = None
    return [*found, *unserved_items(config)]


def _token(config: Config, args: argparse.Namespace) -> int:
    jwt_config = config.auth.jwt
    algorithm = next((a for a in jwt_config.algorithms if a.startswith("HS")), None)
    if not jwt_config.secret or algorithm is None:
        print("error: auth.jwt has no HS secret to sign with", file=sys.stderr)
        return 1
    now = int(time.time())
    claims: dict[str, Any] = {"sub": args.sub, "iat": now, "nbf": now, "exp": now + args.ttl}
    _set_claim(claims, jwt_config.tenant_claim, args.tenant)
    if args.scope:
        _set_claim(claims, jwt_config.scope_claim, args.scope)
    if args.groups:
        _set_claim(claims, jwt_config.groups_claim, _split(args.groups))
    if jwt_config.issuer:
        claims["iss"] = jwt_config.issuer
    if jwt_config.audience:
        claims["aud"] = jwt_config.audience
    print(jwt.encode(claims, jwt_config.secret, algorithm=algorithm))
    return 0


def _set_claim(claims: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node = claims
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _catalogue(config: Config, args: argparse.Namespace) -> int:
    from gateway.catalogue.listings import KINDS
    from gateway.config import TenantConfig

    if args.tenant and args.tenant not in config.tenants:
        print(f"error: unknown tenant {args.tenant!r}", file=sys.stderr)
        return 1

    async def show(service: Any) -> None:
        tenant = config.tenants.get(args.tenant or "") or TenantConfig(name="", backends=("*",))  # no tenant: all
        view = service.view(tenant)
        for entry in view.entries:
            print(f"{entry.exposed}\t{entry.backend}\t{_summary(entry.decoded())}")
        for kind in KINDS:  # prompts, resources and templates: the summary names the kind
            for item in view.listing(kind).entries:
                print(f"{item.exposed}\t{item.backend}\t[{kind.name}] {_summary(item.item.decoded(kind))}")
        for name, snapshot in service.current.snapshots.items():
            if snapshot.status != "ok":
                print(f"# backend {name}: {snapshot.status} ({snapshot.error})", file=sys.stderr)

    asyncio.run(_with_catalogue(config, show))
    return 0


def _explain(config: Config, args: argparse.Namespace) -> int:
    import json

    from gateway.catalogue.explain import explain_list, explain_tool
    from gateway.policy import Principal

    tenant = config.tenants.get(args.tenant)
    if tenant is None:
        print(f"error: unknown tenant {args.tenant!r}", file=sys.stderr)
        return 1
    try:
        claims, arguments = json.loads(args.claims), json.loads(args.args) if args.args else None
    except json.JSONDecodeError as exc:
        print(f"error: --claims and --args must be JSON ({exc.msg})", file=sys.stderr)
        return 1
    if not isinstance(claims, dict) or not isinstance(arguments, dict | None):
        print("error: --claims and --args must be JSON objects", file=sys.stderr)
        return 1
    principal = Principal(tenant.name, args.sub, frozenset(_split(args.scopes)), groups=frozenset(_split(args.groups)),
                          claims=claims)

    server = config.servers.get(args.server) if args.server else None
    if args.server and server is None:
        print(f"error: unknown server {args.server!r}", file=sys.stderr)
        return 1

    async def explained(service: Any) -> dict[str, Any]:
        if server is not None:
            from gateway.catalogue.explain_servers import explain_served

            return explain_served(service, tenant, principal, server, None if args.list else args.tool, arguments)
        if args.list:
            return explain_list(service, tenant, principal)
        return explain_tool(service, tenant, principal, args.tool, arguments)

    print(json.dumps(asyncio.run(_with_catalogue(config, explained)), indent=2))
    return 0


async def _with_catalogue(config: Config, use: Callable[[Any], Any]) -> Any:
    """`use(catalogue)` once every backend was asked for its lists (the wiring `serve` uses, minus the loop)."""
    from gateway.components import build_components
    from gateway.config import LoggingConfig
    from gateway.logs import configure_logging

    # stdout is the answer; only warnings (a backend that could not be reached) go to stderr
    configure_logging(LoggingConfig(level="warning", format="json"), stream=sys.stderr)
    core = build_components(config, list_changed=False)
    await core.pool.start()
    try:
        await core.catalogue.refresh_all()
    finally:
        await core.pool.close()
    return await use(core.catalogue)


def _split(values: str) -> list[str]:
    return [value for value in values.replace(",", " ").split() if value]


def _summary(item: dict[str, object]) -> str:
    return " ".join(str(item.get("description", "")).split())[:80]


def _stdio(config: Config, args: argparse.Namespace) -> int:
    from gateway.stdio_server import serve_stdio

    return serve_stdio(config, args.server)
