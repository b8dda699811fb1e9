"""Streaming a long sequence layer by layer on the deterministic path: its forward pass runs in a helper
thread that hands each layer's result over as soon as it is decomposed and waits until it is taken,
so one layer's maps are held at a time rather than every layer's (`decompose.chunks.streams`).

Pitfall: the helper thread pins torch's intra-op threads to 1 as the reader's does (the deterministic
path's one reduction order); results are identical to the unstreamed path's.
"""
from __future__ import annotations

import queue
import threading
from typing import Iterator

import torch

from report_builder.decompose.layer import LayerResult
from report_builder.engine.common import Tokens, inputs
from report_builder.models.capture import Capturer
from report_builder.models.loading import LoadedModel


class Stopped(BaseException):
    """Raised in the streaming thread's forward pass once the reader has stopped (never escapes)."""


class Stream:
    """Results handed from a forward pass in a helper thread to the reader, one at a time: the thread
    waits until its last result is taken, and stops (`Stopped` inside the forward pass) once the
    reader has gone."""

    def __init__(self):
        self.q: queue.Queue = queue.Queue(maxsize=1)
        self.stop = threading.Event()
        self.seq = 0

    def put(self, item: tuple) -> None:
        while True:
            if self.stop.is_set():
                raise Stopped
            try:
                self.q.put(item, timeout=0.05)
                return
            except queue.Full:
                pass

    def emit(self, layer: int, r: LayerResult) -> None:
        self.put(("layer", self.seq, layer, r))

    def run(self, cap: Capturer, lm: LoadedModel, seqs: list[Tokens], on_batch) -> Iterator:
        def work():
            torch.set_num_threads(1)  # the deterministic path's one reduction order, in this thread too
            try:
                for k in range(len(seqs)):
                    self.seq = k
                    cap.run(inputs(lm, seqs, [k]))
                    self.put(("seq", k, None, None))
                self.put(("end", None, None, None))
            except Stopped:
                return
            except BaseException as e:  # noqa: BLE001 - re-raised in the reader's thread, as itself
                try:
                    self.put(("error", e, None, None))
                except Stopped:
                    pass

        th = threading.Thread(target=work, name="decompose-stream", daemon=True)
        th.start()
        try:
            while True:
                kind, a, b, c = self.q.get()
                if kind == "layer":
                    yield a, b, c
                elif kind == "seq":
                    if on_batch is not None:
                        on_batch(1)
                elif kind == "error":
                    raise a
                else:
                    return
        finally:
            self.stop.set()
            th.join()
