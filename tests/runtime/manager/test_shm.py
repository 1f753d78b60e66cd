"""Shared header + data pairs: created and attached together, nothing left behind on a failure."""

from __future__ import annotations

import os

import pytest
import torch

from soakbench.runtime.manager.shm import (
    SharedCounters,
    TensorSpec,
    attach_header_and_data,
    create_header_and_data,
    list_segments,
)

OURS = f"soakbench_{os.getpid()}_"  # other test processes run in parallel


def test_create_then_attach_shares_counters_and_data() -> None:
    header, data = create_header_and_data("pair", ("a",), ("b",), (2, 3), "cpu")
    try:
        peer_header, peer_data = attach_header_and_data(header.spec, data.spec)
        peer_header.add("a", 5)
        peer_header.addf("b", 0.5)
        peer_data.tensor[1, 2] = 7.0
        assert (header.get("a"), header.getf("b")) == (5, 0.5)
        assert float(data.tensor[1, 2]) == 7.0
        peer_header.close()
        peer_data.close()
    finally:
        header.close()
        data.close()
    assert list_segments(OURS) == []


def test_failed_data_creation_unlinks_the_header() -> None:
    with pytest.raises(ValueError, match="cpu or cuda"):
        create_header_and_data("pair", ("a",), (), (4,), torch.device("meta"))
    assert list_segments(OURS) == []


def test_failed_data_attach_closes_the_header(monkeypatch: pytest.MonkeyPatch) -> None:
    header, data = create_header_and_data("pair", ("a",), (), (4,), "cpu")
    peers_closed: list[SharedCounters] = []
    real_close = SharedCounters.close

    def recording_close(self: SharedCounters) -> None:
        if self is not header:
            peers_closed.append(self)
        real_close(self)

    monkeypatch.setattr(SharedCounters, "close", recording_close)
    try:
        gone = TensorSpec((4,), name=f"{OURS}does_not_exist")
        with pytest.raises(FileNotFoundError):
            attach_header_and_data(header.spec, gone)
        assert len(peers_closed) == 1  # the header the failed attach had mapped was closed
        header.add("a")  # the creator's header is untouched by the failed attach
        assert header.get("a") == 1
    finally:
        header.close()
        data.close()
    assert list_segments(OURS) == []
