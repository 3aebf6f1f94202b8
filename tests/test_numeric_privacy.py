"""A party's numeric-embedding bins are fitted on its own rows and never leave it: no frame it sends holds its bin
edges, one by one or as a tensor."""

from __future__ import annotations

import numpy as np
import torch
from _leaks import leaks

from vsplit.estimator import SplitClassifier


def bin_edges(model: torch.nn.Module) -> list[np.ndarray]:
    """The bin edges a piecewise-linear layer holds, recovered from its buffers (1/width and -left/width)."""
    impl = model.numeric.layer.impl
    scale, shift = impl.weight.detach().numpy(), impl.bias.detach().numpy()
    masks = impl.mask.numpy() if impl.mask is not None else np.ones_like(scale, dtype=bool)  # None: no padding
    out = []
    for row_scale, row_shift, mask in zip(scale, shift, masks, strict=True):
        left = -row_shift[mask] / row_scale[mask]
        out.append(np.concatenate([left, [left[-1] + 1 / row_scale[mask][-1]]]).astype(np.float32))
    return out


def test_no_frame_holds_a_partys_bin_edges(views, frames):
    clf = SplitClassifier(label_party="bank", label="y", epochs=1, batch_size=64, numeric_embedding="piecewise",
                          random_state=0, candidates="network")
    clf.fit(views).predict_proba(views)
    assert frames, "the tap saw no frames"
    for name in ("partner", "bank"):
        model = clf.feature_parties_[name].model if name == "partner" else clf.label_party_.model
        edges = bin_edges(model)
        assert sum(len(e) for e in edges) > 4, "the layer has no bins to look for"
        impl = model.numeric.layer.impl
        blobs = [e.tobytes() for e in edges] + [impl.weight.numpy().tobytes()[:32], impl.bias.numpy().tobytes()[:32]]
        singles = [v for e in edges for v in e if abs(v) not in (0.0, 1.0)]
        for sender, _, msg, frame in frames:
            for blob in blobs:
                assert blob not in frame, f"{sender} sent {name}'s bin edges"
            if sender == name:
                assert not leaks(msg, frame, singles), f"{name} sent a bin edge in a {type(msg).__name__}"
