"""Whether a module's forward pass can draw random numbers: if not, a party need not swap in its own stream.

Swapping a party's random state in and out costs two copies of the generator state per call; for the small models
of split training that is a visible share of a step. A module is taken to draw no random numbers only if every
submodule is of a type known to be deterministic (plain layers, activations, pooling, normalisation and vsplit's
own segment classes, whose forward adds nothing random); anything else, a dropout layer or a class of your own,
keeps the swap.

Example:
    >>> from torch import nn
    >>> draws_random_numbers(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
    False
    >>> draws_random_numbers(nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)))
    True
"""

from __future__ import annotations

from collections.abc import Iterable

from torch import nn

_TORCH = (
    nn.Linear, nn.Bilinear, nn.Embedding, nn.EmbeddingBag, nn.Identity, nn.Flatten, nn.Unflatten,
    nn.Sequential, nn.ModuleList, nn.ModuleDict,
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Softmax, nn.LogSoftmax,
    nn.Softplus, nn.Mish, nn.Hardtanh,
    nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d,
    nn.MaxPool1d, nn.MaxPool2d, nn.AvgPool1d, nn.AvgPool2d, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d,
    nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm,
)
#: vsplit's own module classes: their forward adds nothing random (their children are checked too).
_VSPLIT = ("TabularMLP", "TopModel", "MLP", "ImageHead", "Concat", "Sum", "Mean", "Attention", "NumericEmbedding",
           "EnsembleTop")
#: the numeric embeddings of rtdl-num-embeddings (vsplit.models.numeric): fixed encodings and linear maps
_RTDL = ("PiecewiseLinearEmbeddings", "_PiecewiseLinearEncodingImpl", "LinearEmbeddings", "PeriodicEmbeddings",
         "_Periodic", "_NLinear")


def draws_random_numbers(module: nn.Module) -> bool:
    """False only if no submodule of ``module`` can draw random numbers in its forward pass."""
    for m in module.modules():
        if type(m) in _TORCH:
            continue
        if type(m).__module__.startswith("vsplit.models.") and type(m).__name__ in _VSPLIT:
            continue
        if type(m).__module__ == "rtdl_num_embeddings" and type(m).__name__ in _RTDL:
            continue
        return True
    return False


def any_random(modules: Iterable[nn.Module]) -> bool:
    return any(draws_random_numbers(m) for m in modules)
