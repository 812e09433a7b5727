"""Shared state for many replicas: the Redis client, its health, and cross-replica events.

The stores themselves sit next to what they store (`catalogue/store.py`,
`transport/sessions.py`, `ratelimit.py`), each with an in-process memory implementation
and a Redis one; `wiring.open_shared_state` picks them from `config.store`.
"""
