"""The Redis Stream sink: one trail a whole cluster can query (`XADD … MAXLEN ~`), each record once.

Each record is one stream entry whose field `r` holds its JSON line. A batch goes in one Lua call
that also remembers, per chain, the last `seq` it added (a hash beside the stream): a batch sent
again after a lost reply (Redis restarted, the connection dropped after the script ran) adds only
what is not there yet, so nothing is written twice. The script is atomic, so a batch is either
in, whole, or not at all.
"""

from __future__ import annotations

from typing import Any

import orjson

RECORD_FIELD = "r"
SEEN_SUFFIX = ":seq"
"""The hash beside the stream: chain id -> the last seq it holds."""

_ADD = """
local last = tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '-1')
local added = 0
for i = 3, #ARGV, 2 do
  local seq = tonumber(ARGV[i])
  if seq > last then
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'r', ARGV[i + 1])
    last = seq
    added = added + 1
  end
end
redis.call('HSET', KEYS[2], ARGV[2], last)
return added
"""


def stream_key(prefix: str, stream: str) -> str:
    return prefix + stream


class RedisSink:
    """XADDs batches to `key`; `redis` is a redis.asyncio client the sink owns (and closes)."""

    name = "redis"

    def __init__(self, redis: Any, key: str, *, max_len: int) -> None:
        self.redis, self.key, self.max_len = redis, key, max_len
        self._add = redis.register_script(_ADD)

    async def write(self, lines: list[bytes]) -> None:
        for chain, pairs in _by_chain(lines).items():
            await self._add(keys=[self.key, self.key + SEEN_SUFFIX], args=[self.max_len, chain, *pairs])

    async def close(self) -> None:
        await self.redis.aclose()


def _by_chain(lines: list[bytes]) -> dict[str, list[Any]]:
    """seq, line pairs per chain, in order (one trail writes one chain, but a line says which)."""
    chains: dict[str, list[Any]] = {}
    for line in lines:
        head = orjson.loads(line)
        chains.setdefault(head["chain"], []).extend((head["seq"], line))
    return chains
