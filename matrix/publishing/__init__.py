"""Publishing: the graded matrix rendered as the generated block of ``docs/support-matrix.md``,
``reports/support-matrix.html`` (a grid of grades with per-cell detail, from ``templates/``) and
``reports/support-matrix.json``, and ``matrix check`` as a CI suite.

May import: harness.ci, matrix.model, matrix.declared, matrix.freshness, matrix.grading,
matrix.publishing.
"""

from soakbench.matrix.publishing.ci import check_suite
from soakbench.matrix.publishing.render import PAGE_REL, render_all

__all__ = [
    "PAGE_REL",
    "check_suite",
    "render_all",
]
