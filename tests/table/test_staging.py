"""The writer's staging (table/parquet.Staged): a day's rows become a row group once GROUP of
them are held, the largest day's once HELD rows are held in all, and every row comes back by
its day, in the order given; a staging saved and reopened (the writer's fresh image) holds the
same rows and marks."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pyarrow")

from translator.table.parquet import Staged


class Small(Staged):
    GROUP = 4
    HELD = 6


def log(name: str, runs: int, date: str) -> list[dict[str, Any]]:
    return [{"source": name, "run_index": i, "session_id": f"{name}-{i}", "date": date} for i in range(runs)]


def groups(staged: Staged, date: str) -> list[list[tuple[str, int]]]:
    return [list(zip(g["source"].to_pylist(), g["run_index"].to_pylist(), strict=True)) for g in staged.pieces(date)]


def test_days_become_row_groups_at_group_or_held_rows_and_come_back_whole() -> None:
    staged = Small()
    try:
        staged.add(log("a", 3, "2025-11-01"))
        staged.add(log("b", 2, "2025-11-02"))  # 5 held
        staged.add(log("c", 2, "2025-11-01"))  # the 1st's 5 >= GROUP: written; 2 held
        staged.add(log("d", 3, "2025-11-03"))  # 5 held
        staged.add(log("e", 2, "2025-11-03"))  # the 3rd's 5 >= GROUP: written; 2 held
        staged.add(log("f", 3, "2025-11-02"))  # the 2nd's 5 >= GROUP: written; none held
        staged.add(log("g", 3, "2025-11-01"))
        staged.add(log("h", 3, "2025-11-03"))  # 6 held, not over HELD
        staged.add(log("i", 1, "2025-11-02"))  # 7 > HELD: the largest day (the 1st, of the two of 3 first) written
        staged.add(log("j", 1, "2025-11-01"))  # (so a group of its own)
        assert groups(staged, "2025-11-01") == [[("a", 0), ("a", 1), ("a", 2), ("c", 0), ("c", 1)],
                                                [("g", 0), ("g", 1), ("g", 2)], [("j", 0)]]
        assert groups(staged, "2025-11-02") == [[("b", 0), ("b", 1), ("f", 0), ("f", 1), ("f", 2)], [("i", 0)]]
        assert groups(staged, "2025-11-03") == [[("d", 0), ("d", 1), ("d", 2), ("e", 0), ("e", 1)],
                                                [("h", 0), ("h", 1), ("h", 2)]]
        folder = staged.save(["gone.ndjson"])
        again, unstaged = Small.reopened(folder)
        assert unstaged == ["gone.ndjson"] and groups(again, "2025-11-02") == groups(staged, "2025-11-02")
        marks = [b.to_pylist() for b in again.marks(unstaged).to_batches(max_chunksize=100)]
        assert [m for batch in marks for m in batch] == [
            {"source": s, "runs": n} for s, n in zip("abcdefghij", (3, 2, 2, 3, 2, 3, 3, 3, 1, 1), strict=True)
        ] + [{"source": "gone.ndjson", "runs": 0}]
    finally:
        staged.close()
