"""The plain progress lines: one per sample, or one per --progress-every seconds when quiet."""

from __future__ import annotations

import io

from soakbench.harness.soak.evidence.live import PlainView


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _feed(view: PlainView, clock: _Clock, seconds: int) -> None:
    for t in range(seconds):
        clock.now = float(t)
        view.update({"t": f"{t}s"})


def test_every_sample_prints_a_line_by_default() -> None:
    stream, clock = io.StringIO(), _Clock()
    _feed(PlainView(stream, clock=clock), clock, 1800)
    assert len(stream.getvalue().splitlines()) == 1800


def test_quiet_progress_prints_one_line_per_period_and_every_note() -> None:
    stream, clock = io.StringIO(), _Clock()
    view = PlainView(stream, every_s=60.0, clock=clock)
    _feed(view, clock, 1800)  # a 30-minute soak sampled every second
    view.note("stopping")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 31
    assert lines[0] == "[soak] t=0s" and lines[1] == "[soak] t=60s" and lines[-1] == "[soak] stopping"


def test_the_rich_panel_shows_every_label_whole_at_80_columns() -> None:
    from rich.console import Console

    from soakbench.harness.soak.evidence.live import RichView, panel_table

    fields = {key: "12345/65000" for key in RichView._LABELS}
    console = Console(width=80, file=io.StringIO(), color_system=None)
    console.print(panel_table(fields, RichView._LABELS))
    lines = console.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert max(len(line) for line in lines) <= 80 and len(lines) == 5  # title + four rows
    for label in RichView._LABELS.values():
        assert sum(f" {label} " in f" {line} " for line in lines) == 1, label
    assert "…" not in "".join(lines)
