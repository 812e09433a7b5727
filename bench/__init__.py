"""The benchmark: a stub MCP backend, a load generator, scenarios and a report.

`python -m bench [--quick] [--scenarios 1,2,3] [--repeat N] [--requests N] [--out DIR]`
runs the same load direct to a backend and through the gateway, interleaved, and writes
`bench/results/latest.{json,md,png}` with the ratios and the targets (PASS/MISS).
`python -m bench.instructions` counts CPU instructions per tools/call under callgrind, a
measure that does not swing with the machine's load. `python -m bench.scale` grows the estate
(tools, backends, tenants, sessions), one gateway process per point, and writes
`bench/results/scale.{json,md,png}`.
"""
