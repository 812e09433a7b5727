"""`python -m bench.search.dump NPM_PREFIX PY_BIN`: list the tools of published MCP servers into servers.json.

Each server in SERVERS is started over stdio, as a client would (dummy credentials where it wants
some before it lists its tools), asked `initialize` and every page of `tools/list`, and stopped.
The tools are written as the servers sent them, with each server's package, version, title and
instructions: the fixture `python -m bench.search` builds its catalogue from. Run it again to
refresh the fixture (install the packages first: the README in this folder says how).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("servers.json")
TIMEOUT = 60.0
DUMMY = "dummy-credential-for-listing"

# (namespace, kind, package, arguments after the entry point, environment)
SERVERS: list[tuple[str, str, str, list[str], dict[str, str]]] = [
    ("filesystem", "npm", "@modelcontextprotocol/server-filesystem", ["/tmp"], {}),
    ("memory", "npm", "@modelcontextprotocol/server-memory", [], {}),
    ("everything", "npm", "@modelcontextprotocol/server-everything", [], {}),
    ("github", "npm", "@modelcontextprotocol/server-github", [], {"GITHUB_PERSONAL_ACCESS_TOKEN": DUMMY}),
    ("slack", "npm", "@modelcontextprotocol/server-slack", [], {"SLACK_BOT_TOKEN": DUMMY, "SLACK_TEAM_ID": "T0"}),
    ("maps", "npm", "@modelcontextprotocol/server-google-maps", [], {"GOOGLE_MAPS_API_KEY": DUMMY}),
    ("brave", "npm", "@modelcontextprotocol/server-brave-search", [], {"BRAVE_API_KEY": DUMMY}),
    ("puppeteer", "npm", "@modelcontextprotocol/server-puppeteer", [], {}),
    ("thinking", "npm", "@modelcontextprotocol/server-sequential-thinking", [], {}),
    ("postgres", "npm", "@modelcontextprotocol/server-postgres", ["postgresql://localhost/none"], {}),
    ("gitlab", "npm", "@zereight/mcp-gitlab", [], {"GITLAB_PERSONAL_ACCESS_TOKEN": DUMMY,
                                                  "GITLAB_API_URL": "https://gitlab.invalid/api/v4",
                                                  "USE_GITLAB_WIKI": "true", "USE_MILESTONE": "true",
                                                  "USE_PIPELINE": "true"}),
    ("ms365", "npm", "@softeria/ms-365-mcp-server", ["--org-mode"], {}),
    ("notion", "npm", "@notionhq/notion-mcp-server", [], {"NOTION_TOKEN": DUMMY}),
    ("playwright", "npm", "@playwright/mcp", [], {}),
    ("devtools", "npm", "chrome-devtools-mcp", [], {}),
    ("context7", "npm", "@upstash/context7-mcp", [], {}),
    ("mongodb", "npm", "mongodb-mcp-server", [], {}),
    ("firecrawl", "npm", "firecrawl-mcp", [], {"FIRECRAWL_API_KEY": "fc-dummy"}),
    ("tavily", "npm", "tavily-mcp", [], {"TAVILY_API_KEY": "tvly-dummy"}),
    ("sentry", "npm", "@sentry/mcp-server", [f"--access-token={DUMMY}"], {}),
    ("circleci", "npm", "@circleci/mcp-server-circleci", [], {"CIRCLECI_TOKEN": DUMMY}),
    ("desktop", "npm", "@wonderwhy-er/desktop-commander", [], {}),
    ("launchdarkly", "npm", "@launchdarkly/mcp-server", ["start", f"--api-key={DUMMY}"], {}),
    ("atlassian", "pypi", "mcp-atlassian", [], {"JIRA_URL": "https://example.atlassian.net", "JIRA_USERNAME": "a@b.c",
                                                "JIRA_API_TOKEN": DUMMY, "CONFLUENCE_URL": "https://example.atlassian.net/wiki",
                                                "CONFLUENCE_USERNAME": "a@b.c", "CONFLUENCE_API_TOKEN": DUMMY}),
    ("git", "pypi", "mcp-server-git", [], {}),
    ("fetch", "pypi", "mcp-server-fetch", [], {}),
    ("time", "pypi", "mcp-server-time", [], {}),
]


def command(kind: str, package: str, arguments: list[str], npm_prefix: Path, py_bin: Path) -> list[str]:
    if kind == "pypi":
        return [str(py_bin / package), *arguments]
    manifest = json.loads((npm_prefix / "node_modules" / package / "package.json").read_text())
    entry = manifest["bin"] if isinstance(manifest["bin"], str) else next(iter(manifest["bin"].values()))
    return ["node", str(npm_prefix / "node_modules" / package / entry), *arguments]


async def list_tools(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    process = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                                                   stderr=asyncio.subprocess.DEVNULL, env={**os.environ, **env},
                                                   limit=64 * 1024 * 1024, start_new_session=True)
    assert process.stdin is not None and process.stdout is not None

    async def ask(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                        "params": params}).encode() + b"\n")
        while True:
            line = await process.stdout.readline()
            if not line:
                raise RuntimeError("the server closed its stdout")
            with contextlib.suppress(ValueError):
                message = json.loads(line)
                if isinstance(message, dict) and message.get("id") == request_id:
                    if "error" in message:
                        raise RuntimeError(message["error"])
                    return message["result"]

    try:
        async with asyncio.timeout(TIMEOUT):
            init = await ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                               "clientInfo": {"name": "bench-search-dump", "version": "1"}})
            process.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
            tools: list[dict[str, Any]] = []
            cursor: str | None = None
            for page in range(2, 100):
                result = await ask(page, "tools/list", {"cursor": cursor} if cursor else {})
                tools += result.get("tools", [])
                cursor = result.get("nextCursor")
                if not cursor:
                    break
        info = init.get("serverInfo", {})
        return {"title": info.get("title") or info.get("name", ""), "version": info.get("version", ""),
                "instructions": init.get("instructions") or "", "tools": tools}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        await process.wait()


async def main(npm_prefix: Path, py_bin: Path) -> None:
    servers: dict[str, Any] = {}
    for namespace, kind, package, arguments, env in SERVERS:
        try:
            listed = await list_tools(command(kind, package, arguments, npm_prefix, py_bin), env)
        except Exception as exc:  # reported, and left out of the fixture
            print(f"{namespace:14} {package}: FAILED {exc!r}"[:300], file=sys.stderr)
            continue
        servers[namespace] = {"package": f"{kind}:{package}", **listed}
        print(f"{namespace:14} {package} {listed['version']}: {len(listed['tools'])} tools", file=sys.stderr)
    OUT.write_text(json.dumps(servers, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{sum(len(s['tools']) for s in servers.values())} tools of {len(servers)} servers -> {OUT}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
