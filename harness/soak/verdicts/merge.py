"""The verdict of a job of several nodes from the soak artifacts of its nodes (pure).

Each node's torchrun agent runs under its own ``soak monitor``; every artifact then holds that node's
ranks (``ranks``), labelled with the job's ``TORCHELASTIC_RUN_ID``. The job passed when every node did.
Otherwise the first failure is the rank that failed on its own where a job summary says so, else the
rank whose processes were last seen first (a killed rank vanishes before the peers it takes down).
Artifacts of different runs, of no ranks, or holding the same rank twice are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from soakbench.harness.two_runs.fields import dig

MERGE_SCHEMA_VERSION = 1
CONSEQUENTIAL = ("peer_failure", "external_cancellation")


class MergeError(ValueError):
    """Artifacts that are not the nodes of one job."""


def merge(nodes: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The job's verdict from ``(path, artifact)`` of each node."""
    if len(nodes) < 2:
        raise MergeError(f"soak merge needs the artifacts of at least 2 nodes, got {len(nodes)}")
    run_id = _one_run(nodes)
    entries = [_node(path, artifact) for path, artifact in nodes]
    seen: dict[int, str] = {}
    for entry in entries:
        for rank in entry["ranks"]:
            if rank["rank"] in seen:
                raise MergeError(
                    f"rank {rank['rank']} is in both {seen[rank['rank']]} and {entry['artifact']}"
                )
            seen[rank["rank"]] = entry["artifact"]
    failed = [e for e in entries if e["status"] == "failed"]
    undecided = [e for e in entries if e["status"] == "inconclusive"]
    first = _first_failure(failed)
    status = "failed" if failed else "inconclusive" if undecided else "passed"
    reason = _sentence(first) if first is not None else None
    if status == "inconclusive":  # no node failed; one could not decide its survival target
        reason = "; ".join(f"{e['artifact']}: {e['failure_reason']}" for e in undecided)
    return {
        "merge_schema_version": MERGE_SCHEMA_VERSION,
        "run_id": run_id,
        "status": status,
        "failure_reason": reason,
        "first_failure": first,
        "nodes": entries,
    }


def _one_run(nodes: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    ids: dict[str, str | None] = {}
    for path, artifact in nodes:
        ranks = artifact.get("ranks")
        if not isinstance(ranks, Mapping):
            raise MergeError(f"{path}: has no ranks section: it is not the artifact of a torchrun node")
        ids[path] = ranks.get("run_id")
    unknown = [p for p, run in ids.items() if not run]
    if unknown:
        raise MergeError(
            f"{', '.join(unknown)}: no TORCHELASTIC_RUN_ID was seen, so the run cannot be matched"
        )
    if len(set(ids.values())) > 1:
        listed = ", ".join(f"{p} ({run})" for p, run in ids.items())
        raise MergeError(f"the artifacts are of different runs (TORCHELASTIC_RUN_ID): {listed}")
    return str(next(iter(ids.values())))


def _node(path: str, artifact: Mapping[str, Any]) -> dict[str, Any]:
    started = float(artifact["timing"]["started_at"])
    ranks = artifact["ranks"]["ranks"]
    node_ranks = {r["node_rank"] for r in ranks if isinstance(r.get("node_rank"), int)}
    host = dig(artifact, "context.host.hostname")
    return {
        "artifact": path,
        "host": host,
        "node_rank": min(node_ranks) if node_ranks else None,
        "status": artifact["status"],
        "failure_classification": artifact["failure_classification"],
        "failure_reason": artifact["failure_reason"],
        "ranks": [
            {
                "rank": r["rank"],
                "status": r["status"],
                "failure_classification": r["failure_classification"],
                "failure_reason": r["failure_reason"],
                "last_seen_unix_s": None
                if r["last_seen_t"] is None
                else round(started + r["last_seen_t"], 3),
            }
            for r in ranks
        ],
    }


def _first_failure(failed: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    if not failed:
        return None
    candidates = [(node, rank) for node in failed for rank in node["ranks"]]
    own = [
        c
        for c in candidates
        if c[1]["status"] == "failed" and c[1]["failure_classification"] not in CONSEQUENTIAL
    ]
    timed = [c for c in candidates if c[1]["last_seen_unix_s"] is not None]
    if own:
        node, rank, how = *min(own, key=_seen_key), "its own failure (its job summary)"
    elif timed:
        node, rank, how = *min(timed, key=_seen_key), "its processes were the first to go"
    else:
        node, rank, how = failed[0], None, "no rank could be timed; the node's own verdict"
    return {
        "artifact": node["artifact"],
        "host": node["host"],
        "node_rank": node["node_rank"],
        "rank": rank["rank"] if rank is not None else None,
        "how": how,
        "node_failure_reason": node["failure_reason"],
    }


def _seen_key(candidate: tuple[Mapping[str, Any], Mapping[str, Any]]) -> float:
    seen = candidate[1]["last_seen_unix_s"]
    return float("inf") if seen is None else float(seen)


def _sentence(first: Mapping[str, Any]) -> str:
    node = f"node {first['node_rank']}" if first["node_rank"] is not None else "a node"
    where = f"{node} ({first['host'] or 'unknown host'}, {first['artifact']})"
    rank = f", rank {first['rank']}" if first["rank"] is not None else ""
    return f"{where}{rank} failed first ({first['how']}): {first['node_failure_reason']}"
