"""Filed evidence is written once (pure): a piece changed after the commit that filed it never counts.

A hand that wants a better grade than a run earned can edit a filed file and recompute every digest that
points at it (the index's ``sha256``, an artifact's ``samples_sha256``). Git history cannot be recomputed
that way: it shows the commit that filed each piece and every commit that wrote it after. So a piece
written by a second commit, or changed in the work tree since it was committed, makes its evidence
invalid, naming the commit; a piece whose history a shallow clone cut off is unverifiable, and does not
count either.
"""

from __future__ import annotations

from collections.abc import Mapping

from soakbench.matrix.freshness.filed_history import FiledHistory

#: What a refusal tells the person who finds it.
_REMEDY = "filed evidence is written once: file a new run instead of editing one"


def rewrite_problems(
    pieces: Mapping[str, str], history: FiledHistory, committed: Mapping[str, str]
) -> list[str]:
    """Why the filed ``pieces`` (repo path -> git blob id of its bytes now) cannot be trusted as filed,
    given the evidence root's ``history`` and HEAD's ``committed`` blob ids; empty when they can. A piece
    not yet committed (just ingested) has no history to break."""
    problems = []
    for path, blob in sorted(pieces.items()):
        writes = history.writes.get(path, ())
        if writes and writes[0] in history.boundary:
            problems.append(
                f"unverifiable: the history of {path} starts at {writes[0][:12]}, where this shallow clone's "
                "history stops, so whether it was rewritten cannot be read (git fetch --unshallow)"
            )
        elif len(writes) > 1:
            problems.append(
                f"rewritten: {path} was filed at {writes[0][:12]} and changed at "
                f"{', '.join(c[:12] for c in writes[1:])}; {_REMEDY}"
            )
        if path in committed and committed[path] != blob:
            problems.append(
                f"rewritten: {path} differs from the copy committed at {writes[-1][:12] if writes else 'HEAD'} "
                f"(an uncommitted change); {_REMEDY}"
            )
    return problems
