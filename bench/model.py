"""What a scenario produces: rows (one per series, medians over repetitions), derived numbers,
and targets judged PASS/MISS. Plain dataclasses, turned into JSON by `to_dict`.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

SUMMED = frozenset({"requests", "errors"})
"""Totals over repetitions; every other number in a row is the median of its repetitions."""


@dataclass(slots=True)
class Row:
    label: str
    values: dict[str, Any]
    reps: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def from_samples(cls, label: str, samples: list[dict[str, Any]]) -> Row:
        values: dict[str, Any] = {}
        for key in samples[0] if samples else ():
            numbers = [s[key] for s in samples if isinstance(s.get(key), int | float)]
            if key in SUMMED:
                values[key] = sum(numbers)
            elif numbers:
                values[key] = statistics.median(numbers)
        errors = [e for s in samples for e in s.get("error_samples", [])]
        if errors:
            values["error_samples"] = errors[:5]
        return cls(label, values, samples)

    def get(self, key: str) -> float:
        return float(self.values.get(key, 0.0))


@dataclass(frozen=True, slots=True)
class Target:
    name: str
    value: float | None  # None: not measured in this run
    limit: float
    op: str  # "<=" or ">="
    unit: str = ""

    @property
    def status(self) -> str:
        if self.value is None:
            return "N/A"
        ok = self.value <= self.limit if self.op == "<=" else self.value >= self.limit
        return "PASS" if ok else "MISS"

    def describe(self) -> str:
        shown = "n/a" if self.value is None else f"{self.value:.3g}{self.unit}"
        return f"{self.name}: {shown} (target {self.op} {self.limit:g}{self.unit}) {self.status}"


@dataclass(slots=True)
class ScenarioResult:
    id: str
    title: str
    rows: list[Row] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None  # why the scenario did not run (then rows are empty)
    failed: str | None = None  # the harness broke (not the gateway's answers: those are `errors`)

    @property
    def errors(self) -> int:
        return sum(int(row.values.get("errors", 0)) for row in self.rows)

    def row(self, label: str) -> Row:
        return next(r for r in self.rows if r.label == label)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["errors"] = self.errors
        data["targets"] = [{**asdict(t), "status": t.status} for t in self.targets]
        return data


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else 0.0
