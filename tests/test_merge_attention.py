"""The attention merge weighs parties per row; merges take widths at construction; TopModel grows out_dim."""

from __future__ import annotations

import math

import pytest
import torch

from vsplit.errors import ConfigError
from vsplit.models.merge import MERGES, Attention
from vsplit.models.top import TopModel


def parts_for(widths, n=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(n, w, generator=g) for w in widths]


def test_attention_output_has_the_widest_embedding_width():
    torch.manual_seed(0)
    merge = MERGES.get("attention")([4, 9, 6])
    assert merge(parts_for([4, 9, 6])).shape == (5, 9)
    assert MERGES.get("attention").output_width([4, 9, 6]) == 9


def test_attention_weights_sum_to_one_per_row_and_move_away_from_uniform_when_the_query_is_learned():
    torch.manual_seed(1)
    merge = Attention([3, 3])
    parts = parts_for([3, 3])
    assert torch.allclose(merge.weights(parts), torch.full((5, 2), 0.5))
    with torch.no_grad():
        merge.query.normal_()
    weights = merge.weights(parts)
    assert torch.allclose(weights.sum(1), torch.ones(5))
    assert (weights >= 0).all() and not torch.allclose(weights, torch.full((5, 2), 0.5))


def test_attention_output_is_the_weighted_sum_of_the_projections():
    torch.manual_seed(2)
    merge = Attention([2, 4])
    with torch.no_grad():
        merge.query.normal_()
    parts = parts_for([2, 4])
    projected = [proj(x) for proj, x in zip(merge.projections, parts, strict=True)]
    scores = torch.stack([p @ merge.query for p in projected], dim=1) / math.sqrt(4)
    w = torch.softmax(scores, dim=1)
    expected = w[:, :1] * projected[0] + w[:, 1:] * projected[1]
    assert torch.allclose(merge(parts), expected, atol=1e-6)


def test_gradients_reach_every_partys_projection_the_query_and_the_embeddings():
    torch.manual_seed(3)
    merge = Attention([3, 5, 2])
    with torch.no_grad():
        merge.query.normal_()
    parts = [p.requires_grad_() for p in parts_for([3, 5, 2])]
    (merge(parts) ** 2).sum().backward()
    for proj in merge.projections:
        assert proj.weight.grad is not None and proj.weight.grad.abs().sum() > 0
    assert merge.query.grad.abs().sum() > 0
    assert all(p.grad.abs().sum() > 0 for p in parts)


def test_attention_refuses_a_different_number_of_embeddings():
    merge = Attention([3, 3])
    with pytest.raises(ConfigError, match="built for 2 parties got 3"):
        merge(parts_for([3, 3, 3]))


def test_every_merge_is_built_from_the_widths():
    parts = parts_for([4, 4])
    for name in MERGES.names():
        merge = MERGES.get(name)([4, 4])
        assert merge(parts).shape == (5, merge.output_width([4, 4]))
    with pytest.raises(ConfigError, match="equal embedding widths"):
        MERGES.get("mean")([4, 3])


def test_top_model_out_dim_one_keeps_the_shape_and_parameters_of_before():
    torch.manual_seed(4)
    default = TopModel(widths={"bank": 4, "partner": 4}, hidden=(8,))
    torch.manual_seed(4)
    explicit = TopModel(widths={"bank": 4, "partner": 4}, hidden=(8,), out_dim=1)
    names = [n for n, _ in default.named_parameters()]
    assert names == ["head.1.weight", "head.1.bias", "head.3.weight", "head.3.bias"]
    assert all(torch.equal(a, b) for a, b in zip(default.parameters(), explicit.parameters(), strict=True))
    assert default({"bank": torch.ones(3, 4), "partner": torch.ones(3, 4)}).shape == (3,)


def test_top_model_with_attention_and_several_outputs_returns_a_matrix():
    torch.manual_seed(5)
    top = TopModel(widths={"bank": 6, "partner": 3}, merge="attention", hidden=(8,), out_dim=4)
    out = top({"bank": torch.randn(7, 6), "partner": torch.randn(7, 3)})
    assert out.shape == (7, 4)
    out.sum().backward()
    assert top.merge.projections[1].weight.grad.abs().sum() > 0
