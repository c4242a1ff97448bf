"""What a results table says, at a glance (`translator report`, cli/report.py, is its command).

On the terminal: cost, runs, failure rate and p50/p95 duration per day and model, and the
outcomes by subtype. With `--html`, one self-contained page (inline SVG, no scripts, nothing
fetched) with the same tables and three plots drawn by matplotlib: cost per day by model,
outcomes, and the duration distribution. For anything else, query the dataset directly
(DuckDB, pandas, Spark; docs/fleet.md).
"""

from __future__ import annotations

import html
import io
from collections import Counter, defaultdict
from typing import Any

from translator.extras import need
from translator.object_store import configured_timeout, faults, filesystem


def load(path: str) -> list[dict[str, Any]]:
    """Every row of the dataset at `path` (local or a URL)."""
    need("pyarrow", "report")
    import pyarrow.dataset as ds

    if "://" not in path:
        return ds.dataset(path, format="parquet", partitioning="hive").to_table().to_pylist()  # type: ignore[no-any-return]
    from pyarrow import fs as pafs

    timeout = configured_timeout()
    with faults(path, timeout):  # a store that fails: one line naming it, 74
        fs, bare = filesystem(path, timeout)
        dataset = ds.dataset(bare, format="parquet", partitioning="hive", filesystem=pafs.PyFileSystem(pafs.FSSpecHandler(fs)))
        rows: list[dict[str, Any]] = dataset.to_table().to_pylist()
    return rows


def quantile(values: list[int], q: float) -> int | None:
    """The nearest-rank quantile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def by_day_and_model(rows: list[dict[str, Any]]) -> list[list[str]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(str(r["date"]), r["model"] or "(none)")].append(r)
    table = [["date", "model", "runs", "failed", "cost USD", "p50 ms", "p95 ms"]]
    for (date, model), runs in sorted(groups.items()):
        durations = [r["duration_ms"] for r in runs if r["duration_ms"] is not None]
        failed = sum(bool(r["is_error"]) for r in runs)
        table.append([date, model, str(len(runs)), f"{failed} ({100 * failed / len(runs):.0f}%)",
                      f"{sum(r['total_cost_usd'] or 0.0 for r in runs):.4f}",
                      str(quantile(durations, 0.5)), str(quantile(durations, 0.95))])
    return table


def by_subtype(rows: list[dict[str, Any]]) -> list[list[str]]:
    counts = Counter(str(r["subtype"]) for r in rows)
    return [["subtype", "runs", "share"]] + [
        [subtype, str(n), f"{100 * n / len(rows):.1f}%"] for subtype, n in counts.most_common()
    ]


def text_table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
                     for row in rows)


def html_table(rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows[1:])
    return f"<table><tr>{head}</tr>{body}</table>"


def plots(rows: list[dict[str, Any]]) -> list[str]:
    """Three SVG figures: cost per day by model, outcomes, duration distribution."""
    matplotlib = need("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    svgs = []
    days = sorted({str(r["date"]) for r in rows})
    models = sorted({r["model"] or "(none)" for r in rows})
    cost: dict[tuple[str, str], float] = defaultdict(float)
    for r in rows:
        cost[(str(r["date"]), r["model"] or "(none)")] += r["total_cost_usd"] or 0.0
    fig, ax = plt.subplots(figsize=(8, 3.5))
    bottom = [0.0] * len(days)
    for model in models:
        heights = [cost[(d, model)] for d in days]
        ax.bar(days, heights, bottom=bottom, label=model)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set(title="Cost per day by model", ylabel="USD")
    ax.legend(fontsize="small")
    svgs.append(fig)
    fig, ax = plt.subplots(figsize=(8, 3))
    outcomes = Counter(str(r["subtype"]) for r in rows).most_common()
    ax.barh([s for s, _ in outcomes], [n for _, n in outcomes])
    ax.set(title="Outcomes", xlabel="runs")
    svgs.append(fig)
    fig, ax = plt.subplots(figsize=(8, 3))
    ax.hist([r["duration_ms"] / 1000 for r in rows if r["duration_ms"] is not None], bins=40)
    ax.set(title="Duration distribution", xlabel="seconds", ylabel="runs")
    svgs.append(fig)
    out = []
    for fig in svgs:
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        plt.close(fig)
        out.append(buf.getvalue()[buf.getvalue().index("<svg"):])
    return out


def page(path: str, rows: list[dict[str, Any]]) -> str:
    style = ("body{font-family:sans-serif;margin:2em;max-width:60em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}")
    parts = [f"<!doctype html><meta charset=utf-8><title>translator report: {html.escape(path)}</title>",
             f"<style>{style}</style><h1>{len(rows)} runs in {html.escape(path)}</h1>",
             *plots(rows), "<h2>By day and model</h2>", html_table(by_day_and_model(rows)),
             "<h2>Outcomes</h2>", html_table(by_subtype(rows))]
    return "\n".join(parts) + "\n"
