"""Shared state for many replicas: the Redis client, its health, and cross-replica events.

Only these pure store parts live here, below everything that uses them. The stores
themselves sit next to what they store (`catalogue/store.py`, `transport/sessions.py`,
`ratelimit.py`), each with an in-process memory implementation and a Redis one;
`gateway.shared_state.open_shared_state` picks them from `config.store`.
"""
