"""Segment modules: MLP chains, the ImageHead CNN, and an ImageHead + MLP that learns the digits preset."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vsplit.errors import ConfigError
from vsplit.models.segments import MLP, ImageHead

NO_CATEGORIES = torch.zeros(3, 0, dtype=torch.long)


def test_mlp_is_a_chain_of_linear_layers_with_relu_between():
    mlp = MLP(5, hidden=(8, 4), out_dim=2)
    kinds = [type(m) for m in mlp.layers]
    assert kinds == [nn.Linear, nn.ReLU, nn.Linear, nn.ReLU, nn.Linear]
    assert mlp(torch.zeros(3, 5)).shape == (3, 2)


def test_mlp_dropout_and_final_activation_are_optional_layers():
    mlp = MLP(5, (8,), 3, dropout=0.2, final_activation=True)
    assert [type(m) for m in mlp.layers] == [nn.Linear, nn.ReLU, nn.Dropout, nn.Linear, nn.ReLU]
    assert (mlp.eval()(torch.randn(10, 5)) >= 0).all()


def test_mlp_without_hidden_layers_is_one_linear_map():
    mlp = MLP(4, hidden=(), out_dim=1)
    assert len(mlp.layers) == 1 and isinstance(mlp.layers[0], nn.Linear)


def test_image_head_default_output_width_is_16_channels_of_4x4():
    head = ImageHead()
    assert head.out_width == 256
    assert head(NO_CATEGORIES, torch.rand(3, 64)).shape == (3, 256)
    convs = [m for m in head.layers if isinstance(m, nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (1, 8, (3, 3), (1, 1)), (8, 16, (3, 3), (1, 1)),
    ]


def test_image_head_out_dim_adds_a_linear_layer():
    head = ImageHead(shape=(2, 6, 6), channels=(4,), out_dim=10)
    assert head.out_width == 10
    assert isinstance(head.layers[-1], nn.Linear) and head.layers[-1].in_features == 4 * 3 * 3
    assert head(NO_CATEGORIES, torch.rand(3, 72)).shape == (3, 10)


def test_image_head_reads_pixels_row_major():
    torch.manual_seed(0)
    head = ImageHead(channels=(2,))
    images = torch.rand(3, 1, 8, 8)
    expected = head.layers(images)
    assert torch.equal(head(NO_CATEGORIES, images.reshape(3, 64)), expected)


def test_image_head_refuses_the_wrong_number_of_pixel_columns():
    with pytest.raises(ConfigError, match="expects 64 pixel columns for shape \\(1, 8, 8\\), got 63; set shape="):
        ImageHead()(NO_CATEGORIES, torch.rand(3, 63))


def test_image_head_and_mlp_learn_digits_above_90_percent_on_one_thread():
    from vsplit.data.preprocess import TablePreprocessor
    from vsplit.datasets import preset
    from vsplit.models.tasks import make_task

    data = preset("digits", seed=0)
    train, test = data.train["client"], data.test["client"]
    pixels = [c for c in train.columns if c.startswith("px")]
    prep = TablePreprocessor(scaling="standard").fit(train[pixels])
    task = make_task("multiclass")
    y_train, info = task.encode(train[data.label], name=data.label)
    y_test = task.encode_with(test[data.label], info)
    (cat, num), (cat_test, num_test) = prep.transform(train[pixels]), prep.transform(test[pixels])

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        head = ImageHead()
        tail = MLP(head.out_width, (64,), task.output_width(len(info["classes"])))
        optimizer = torch.optim.Adam([*head.parameters(), *tail.parameters()], lr=3e-3)
        order = torch.Generator().manual_seed(0)
        for _ in range(8):
            for batch in torch.randperm(len(y_train), generator=order).split(64):
                loss = task.loss(tail(head(cat[batch], num[batch])), y_train[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        with torch.no_grad():
            proba = task.predict(tail(head(cat_test, num_test)))
    finally:
        torch.set_num_threads(threads)
    assert task.metrics(y_test.numpy(), proba)["accuracy"] > 0.90
