"""The support matrix: every algo x task x backend x platform cell graded from filed evidence only.

Rooms by role, each with one public surface in its ``__init__``: ``declared``, ``freshness``, ``grading``,
``intake`` and ``publishing``. At the top: the CLI, the pieces every room shares (``model``,
``schema_check``, ``fileio``), ``prune`` and the pytest plugin ``pytest_cell``.
May import: foundation, harness, matrix.
"""
