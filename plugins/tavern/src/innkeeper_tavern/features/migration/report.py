"""The report of a folder import: a progress bar, per-item problems, a summary by kind, JSON.

Statuses: ``imported``, ``duplicate`` (already there, by content hash), ``refused`` (with the
reason; makes the command exit 1) and ``unsupported`` (a SillyTavern feature Innkeeper does not
import; reported, not an error).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal, TextIO

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

Status = Literal["imported", "duplicate", "refused", "unsupported"]
STATUSES: Final[tuple[Status, ...]] = ("imported", "duplicate", "refused", "unsupported")
KINDS: Final = (
    "character",
    "world-book",
    "preset",
    "persona",
    "chat",
    "group",
    "group-member",
    "group-chat",
    "regex",
    "folder",
)


@dataclass(slots=True)
class Item:
    """One line of the report."""

    kind: str
    source: str
    status: Status
    detail: str = ""
    id: str | None = None


class Bar:
    """A rich progress bar on a terminal stream; silent otherwise."""

    def __init__(self, stream: TextIO, total: int) -> None:
        self._progress: Progress | None = None
        if stream.isatty():
            from rich.console import Console

            self._progress = Progress(
                TextColumn("{task.description:<32.32}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(file=stream),
                transient=False,
            )
            self._task = self._progress.add_task("importing", total=max(total, 1))
            self._progress.start()

    def step(self, label: str) -> None:
        """Advance by one item."""
        if self._progress is not None:
            self._progress.update(self._task, advance=1, description=label)

    def close(self) -> None:
        """Stop drawing."""
        if self._progress is not None:
            self._progress.stop()


def summary(items: list[Item]) -> dict[str, dict[str, int]]:
    """``{kind: {status: count}}`` for every kind that occurs."""
    counts = Counter((i.kind, i.status) for i in items)
    kinds = [k for k in KINDS if any(i.kind == k for i in items)]
    kinds += sorted({i.kind for i in items} - set(kinds))
    return {k: {s: counts[(k, s)] for s in STATUSES} for k in kinds}


def as_json(target: str, items: list[Item], *, dry_run: bool) -> str:
    """The machine-readable report (``--json``)."""
    doc: dict[str, Any] = {
        "target": target,
        "dryRun": dry_run,
        "summary": summary(items),
        "items": [asdict(i) for i in items],
    }
    return json.dumps(doc, ensure_ascii=False, indent=2)


def as_text(items: list[Item], *, dry_run: bool, verbose: bool) -> str:
    """The human report: the items worth reading, then the summary table by kind."""
    from innkeeper_tavern.features.migration.output import render_table

    shown = [i for i in items if verbose or i.status in ("refused", "unsupported")]
    parts: list[str] = []
    if shown:
        rows = [(i.status, i.kind, i.source, i.detail) for i in shown]
        parts.append(render_table(rows, ("RESULT", "KIND", "SOURCE", "DETAIL")))
        parts.append("")
    table = summary(items)
    head = "would import" if dry_run else "imported"
    rows2 = [(k, *(str(v[s]) for s in STATUSES)) for k, v in table.items()]
    totals = [str(sum(v[s] for v in table.values())) for s in STATUSES]
    rows2.append(("total", *totals))
    parts.append(
        render_table(rows2, ("KIND", head, "skipped (duplicate)", "refused", "unsupported"))
    )
    return "\n".join(parts)
