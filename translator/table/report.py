"""What a results table says, written out (`translator report`; cli/report.py is its command,
summary.py computes the numbers).

As text: the totals first (runs, logs, sessions, failed and the rate, cost, tokens), then per
model, per day and the failures by reason, by subtype and their top messages. As JSON: one
object of the same. As CSV: the table per day and model, for a spreadsheet. With `--html`, one
self-contained page (inline SVG, no scripts, nothing fetched) that leads with the totals, then
cost per day by model, runs per day with the failed ones in red, and the failures' reasons.
"""

from __future__ import annotations

import csv
import html
import io
from collections import defaultdict
from datetime import date
from typing import Any

import orjson

from translator.extras import need
from translator.table.summary import Summary

FAILED = "#c0392b"  # the colour of failures, on the page and in its plots
OK = "#4a78b0"
MODEL_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#bcbd22", "#17becf", "#7f7f7f"]  # no red
TEXT_ERROR = 120  # characters of an error message shown in a table
TOP_MODELS = 8  # models drawn apart in the cost plot; the rest are "(other)"


def headline(s: Summary) -> str:
    t = s.totals
    return (f"{t['runs']:,} runs in {t['logs']:,} logs ({t['sessions']:,} sessions), {t['failed']:,} failed "
            f"({100 * t['failure_rate']:.1f}%), {t['total_cost_usd']:.4f} USD, {t['input_tokens']:,} input tokens, "
            f"{t['output_tokens']:,} output tokens; {t['first_day']} to {t['last_day']}")


def _failed(row: dict[str, Any]) -> str:
    return f"{row['failed']:,} ({100 * row['failed'] / row['runs']:.0f}%)" if row["runs"] else "0"


def tables(s: Summary) -> list[tuple[str, list[list[str]]]]:
    """The report's tables, titled, as rows of text cells (a header row first)."""
    runs = s.totals["runs"]
    failed = s.totals["failed"] or 1
    return [
        ("By model", [["model", "runs", "failed", "cost USD", "input tokens", "output tokens", "p50 ms", "p95 ms"]] + [
            [m["model"], f"{m['runs']:,}", _failed(m), f"{m['total_cost_usd']:.4f}", f"{m['input_tokens']:,}",
             f"{m['output_tokens']:,}", str(m["p50_ms"]), str(m["p95_ms"])] for m in s.by_model]),
        ("By day", [["day", "runs", "failed", "cost USD"]] + [
            [str(d["day"]), f"{d['runs']:,}", _failed(d), f"{d['total_cost_usd']:.4f}"] for d in s.by_day]),
        ("Failures by reason", [["reason", "runs", "share of failed"]] + [
            [r["reason"], f"{r['runs']:,}", f"{100 * r['runs'] / failed:.1f}%"] for r in s.failures["by_reason"]]),
        ("Failures by subtype", [["subtype", "runs", "share of runs"]] + [
            [r["subtype"], f"{r['runs']:,}", f"{100 * r['runs'] / runs:.1f}%"] for r in s.failures["by_subtype"]]),
        ("Top error messages", [["error", "reason", "runs"]] + [
            [_short(r["error"]), r["reason"], f"{r['runs']:,}"] for r in s.failures["top_errors"]]),
    ]


def _short(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= TEXT_ERROR else one[: TEXT_ERROR - 1] + "…"


def text_table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 or not _numeric(row, i) else cell.rjust(w)
                               for i, (cell, w) in enumerate(zip(row, widths, strict=True))).rstrip() for row in rows)


def _numeric(row: list[str], i: int) -> bool:
    return bool(row[i]) and (row[i][0].isdigit() or row[i] == "None")


def text(s: Summary) -> str:
    parts = [headline(s)]
    kept = {k: v for k, v in s.filters.items() if v is not None}
    if kept:
        parts.append("filtered: " + ", ".join(f"{k} {v}" for k, v in kept.items()))
    for title, rows in tables(s):
        if len(rows) > 1:
            parts.append(f"{title}\n{text_table(rows)}")
    return "\n\n".join(parts) + "\n"


def as_json(s: Summary) -> str:
    body = {**s.totals, "filters": s.filters, "by_model": s.by_model, "by_day": s.by_day,
            "by_day_and_model": s.by_day_and_model, "failures": s.failures}
    return orjson.dumps(body, option=orjson.OPT_INDENT_2, default=str).decode() + "\n"


def as_csv(s: Summary) -> str:
    """The table per day and model: one header row, one row each."""
    out = io.StringIO()
    names = ["day", "model", "runs", "failed", "total_cost_usd", "input_tokens", "output_tokens"]
    writer = csv.DictWriter(out, names, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(s.by_day_and_model)
    return out.getvalue()


def _day(value: Any) -> date | None:
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        return None


DAY_TICKS = 100  # up to this many days, the per-day charts place their own day ticks


def plots(s: Summary) -> list[str]:
    """Three SVG figures: cost per day by model (the top models apart, the rest as one), runs
    per day with the failed in red, and the failures by reason. Dates on a date axis (ticks
    placed and labelled by matplotlib's concise formatter: readable at 90 days or 900); each
    legend outside the plot, on its right."""
    matplotlib = need("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mdates = need("matplotlib.dates")  # (a module: its untyped functions as Any)

    top = [m["model"] for m in s.by_model[:TOP_MODELS]]
    cost: dict[str, dict[date, float]] = defaultdict(lambda: defaultdict(float))
    for row in s.by_day_and_model:
        if (day := _day(row["day"])) is not None:
            cost[row["model"] if row["model"] in top else "(other)"][day] += row["total_cost_usd"]
    days = sorted({d for by_day in cost.values() for d in by_day})
    x = [float(mdates.date2num(d)) for d in days]
    figures = []

    shown = sorted({*days, *(d for row in s.by_day if (d := _day(row["day"])) is not None)})

    def dated(ax: Any) -> None:
        """Day ticks at any span: matplotlib's own locator ticks hours under a few days (a
        one-day table drew 03:00, 06:00, ...), so up to DAY_TICKS days a tick every day or
        every few; beyond, its own (days, weeks, months: never hours there)."""
        span = (shown[-1] - shown[0]).days + 1 if shown else 1
        if span <= DAY_TICKS:
            ax.xaxis.set_major_locator(mdates.DayLocator(interval=-(-span // 10)))
            ax.xaxis.set_major_formatter(mdates.DateFormatter("%b %d"))  # (the concise one says 00:00 for one day)
        else:
            locator = mdates.AutoDateLocator(maxticks=10)
            ax.xaxis.set_major_locator(locator)
            ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
        if shown:  # half a day and a bar's margin each side: the first and last day's ticks within
            ax.set_xlim(float(mdates.date2num(shown[0])) - 0.75, float(mdates.date2num(shown[-1])) + 0.75)

    fig, ax = plt.subplots(figsize=(9, 3.5))
    bottom = [0.0] * len(days)
    for model, colour in zip([*[m for m in top if m in cost], *(["(other)"] if "(other)" in cost else [])], MODEL_COLOURS,
                             strict=False):
        heights = [cost[model].get(d, 0.0) for d in days]
        ax.bar(x, heights, bottom=bottom, width=0.85, label=model, color=colour)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set(title="Cost per day by model", ylabel="USD")
    dated(ax)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    figures.append(fig)

    fig, ax = plt.subplots(figsize=(9, 3))
    kept = [(float(mdates.date2num(d)), row) for row in s.by_day if (d := _day(row["day"])) is not None]
    ax.bar([d for d, _ in kept], [r["runs"] - r["failed"] for _, r in kept], width=0.85, color=OK, label="succeeded")
    ax.bar([d for d, _ in kept], [r["failed"] for _, r in kept], bottom=[r["runs"] - r["failed"] for _, r in kept],
           width=0.85, color=FAILED, label="failed")
    ax.set(title="Runs per day", ylabel="runs")
    dated(ax)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    figures.append(fig)

    reasons = s.failures["by_reason"][::-1]
    if reasons:
        fig, ax = plt.subplots(figsize=(9, 0.6 + 0.35 * len(reasons)))
        ax.barh([r["reason"] for r in reasons], [r["runs"] for r in reasons], color=FAILED)
        ax.set(title="Failed runs by reason", xlabel="runs")
        figures.append(fig)
    out = []
    for fig in figures:
        fig.tight_layout()
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        plt.close(fig)
        out.append(buf.getvalue()[buf.getvalue().index("<svg"):])
    return out


def html_table(rows: list[list[str]], failed: int | None = None) -> str:
    """A table; the cells of column `failed` that are not zero in the failures' colour."""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])

    def cell(i: int, c: str) -> str:
        bad = i == failed and not c.startswith("0")
        return f"<td class=bad>{html.escape(c)}</td>" if bad else f"<td>{html.escape(c)}</td>"

    body = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows[1:])
    return f"<table><tr>{head}</tr>{body}</table>"


def page(path: str, s: Summary) -> str:
    t = s.totals
    style = ("body{font-family:sans-serif;margin:2em;max-width:64em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}td:first-child{text-align:left}"
             f".bad{{color:{FAILED};font-weight:bold}}.cards{{display:flex;flex-wrap:wrap;gap:1em}}"
             ".card{border:1px solid #ccc;border-radius:.4em;padding:.5em 1em}.card b{display:block;font-size:1.6em}")
    cards = [("runs", f"{t['runs']:,}"), ("sessions", f"{t['sessions']:,}"), ("logs", f"{t['logs']:,}"),
             ("failed", f"{t['failed']:,} ({100 * t['failure_rate']:.1f}%)"), ("cost", f"{t['total_cost_usd']:.2f} USD"),
             ("input tokens", f"{t['input_tokens']:,}"), ("output tokens", f"{t['output_tokens']:,}"),
             ("days", f"{t['first_day']} to {t['last_day']}")]
    shown = "".join(f"<div class=card{' bad' if name == 'failed' and t['failed'] else ''}><b>{html.escape(value)}</b>{name}</div>"
                    for name, value in cards)
    named = dict(tables(s))
    parts = [f"<!doctype html><meta charset=utf-8><title>translator report: {html.escape(path)}</title>",
             f"<style>{style}</style><h1>{html.escape(path)}</h1><div class=cards>{shown}</div>", *plots(s),
             "<h2>By model</h2>", html_table(named["By model"], 2),
             "<h2>Failures by reason</h2>", html_table(named["Failures by reason"], 1),
             "<h2>Failures by subtype</h2>", html_table(named["Failures by subtype"], 1),
             "<h2>Top error messages</h2>", html_table(named["Top error messages"], 2),
             "<h2>By day</h2>", html_table(named["By day"], 2)]
    return "\n".join(parts) + "\n"
