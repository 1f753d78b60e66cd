"""The report's survival section: each projected class drawn out to its limit, with the bound.

For every class of the artifact's ``survival`` that has a limit and a rate bound: the levels it was
projected from (hours before the end of the window), then the lines the verdict rests on out to the
target (or to exhaustion at the upper bound, whichever is later): the upper bound, the estimate and the
lower bound of the growth rate, each from the level at the end; and the level at which the limit is
reached (the level plus the headroom). Where the upper line meets that level is the lower bound on the
time to exhaustion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.soak.evidence.report_plots import new_figure, png_data_uri
from soakbench.harness.soak.verdicts.exhaustion_series import TREE_CLASSES

MIB = float(1 << 20)
#: at most this many classes are drawn (a 100-process tree lists the processes nearest exhaustion first)
MAX_PLOTS = 12


def _observed(cls: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> list[tuple[float, float]]:
    """(t, level) of the class in the samples: its ``totals`` field, a path's disk bytes, the run's shm
    bytes, or one process's fds or mappings."""
    name, scope = str(cls["class"]), str(cls["scope"])
    points: list[tuple[float, Any]] = []
    for sample in samples:
        if name in TREE_CLASSES:
            value = (sample.get("totals") or {}).get(TREE_CLASSES[name][0])
        elif name == "shm_bytes":
            value = (sample.get("shm") or {}).get("run_bytes")
        elif name.startswith("disk:"):
            value = next(
                (d.get("bytes") for d in sample.get("disk") or () if d.get("path") == name[5:]), None
            )
        else:
            proc = next((p for p in sample.get("processes") or () if str(p.get("pid")) == scope), None)
            value = (
                None
                if proc is None
                else (proc.get("fds") or {}).get("total")
                if name == "fds"
                else proc.get(name)
            )
        points.append((float(sample["t"]), value))
    return [(t, float(v)) for t, v in points if isinstance(v, int | float) and not isinstance(v, bool)]


def _plot(cls: Mapping[str, Any], samples: Sequence[Mapping[str, Any]], target_h: float | None) -> str | None:
    rate_up, level, headroom = cls.get("rate_upper_per_hour"), cls.get("level"), cls.get("headroom")
    if rate_up is None or headroom is None or level is None:
        return None
    window = cls.get("window") or {}
    points = [
        (t, v) for t, v in _observed(cls, samples) if window.get("t_end") is None or t <= window["t_end"]
    ]
    if not points:
        return None
    end_t = points[-1][0]
    scale, unit = (MIB, "MiB") if cls.get("unit") == "bytes" else (1.0, "count")
    hours = cls.get("hours_to_exhaustion_lower")
    horizon = max(h for h in (target_h, hours, (end_t - points[0][0]) / 3600.0) if h is not None)
    horizon = min(horizon, 10.0 * (target_h or hours or 1.0))
    fig, ax = new_figure(6.4, 3.0)
    ax.plot([(t - end_t) / 3600.0 for t, _ in points], [v / scale for _, v in points], lw=1, color="#1f2937")
    ceiling = (float(level) + float(headroom)) / scale
    ax.axhline(ceiling, color="#b91c1c", lw=1.2, label=f"limit ({cls.get('limit_source', '')[:40]})")
    for key, style, label in (
        ("rate_upper_per_hour", "-", "upper bound"),
        ("rate_per_hour", "--", "estimate"),
        ("rate_lower_per_hour", ":", "lower bound"),
    ):
        rate = cls.get(key)
        if rate is not None:
            ax.plot(
                [0.0, horizon], [level / scale, (level + rate * horizon) / scale], ls=style, lw=1, label=label
            )
    if target_h is not None:
        ax.axvline(target_h, color="#6b7280", lw=1, ls="--", label=f"target {target_h:g} h")
    where = "tree" if cls["scope"] == "tree" else f"pid {cls['scope']} ({cls.get('role') or '?'})"
    ax.set_title(f"{cls['class']} of the {where}: {cls['verdict']}", fontsize=9)
    ax.set_xlabel("hours from the end of the window")
    ax.set_ylabel(unit)
    ax.set_ylim(bottom=0.0, top=ceiling * 1.05)
    ax.legend(fontsize=7, loc="upper left")
    return png_data_uri(fig)


def survival_view(artifact: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The section's table rows and plots, or None for an artifact without ``survival`` (0.3.0)."""
    survival = artifact.get("survival")
    if not isinstance(survival, Mapping):
        return None
    target_s = survival.get("target_seconds")
    target_h = None if target_s is None else float(target_s) / 3600.0
    classes = [dict(c, window=survival.get("window") or {}) for c in survival.get("classes") or ()]
    ranked = sorted(
        classes,
        key=lambda c: (
            c["hours_to_exhaustion_lower"] if c.get("hours_to_exhaustion_lower") is not None else 1e300
        ),
    )
    plots = [uri for uri in (_plot(c, samples, target_h) for c in ranked[:MAX_PLOTS]) if uri is not None]
    return {"survival": survival, "target_hours": target_h, "classes": ranked, "plots": plots}
