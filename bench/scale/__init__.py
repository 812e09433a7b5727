"""Scale curves: how the gateway's costs grow with the estate it serves.

`python -m bench.scale` starts one gateway process per point, with real stub backends, and grows
one thing at a time: tools in a tenant's view, backends (HTTP and stdio), tenants with distinct
views, open sessions (memory and Redis stores). It writes `bench/results/scale.{json,md,png}`, and
counts a tools/call's instructions (bench.instructions' method) at each curve's ends, which must
stay flat.
"""
