"""An image preset cut up for privacy studies: the client's private rows, the attacker's public rows, test rows.

The attacks on activations need what an attacker is assumed to have: images of the same domain that are not the
client's (He et al.'s auxiliary data; Pasquini et al.'s public data). :func:`image_study` holds a stratified share of
the preset's training rows apart as that *public* set; the client trains on the rest (*private*); the test rows
measure accuracy. Pixels are kept as the preset's columns (``px00`` ... for ``digits``, values 0 to 16), and
:meth:`ImageStudy.images` gives them as images in [0, 1], the scale every quality metric uses.

Example:
    >>> study = image_study("digits", seed=0)
    >>> len(study.private) + len(study.public), study.shape, study.images(study.test).shape
    (1437, (1, 8, 8), (360, 8, 8))
    >>> sorted(study.views("vanilla", study.test)), list(study.views("u_shaped", study.test))
    (['client', 'server'], ['client'])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from vsplit.errors import ConfigError
from vsplit.privacy.detectors.base import aligned

#: Image presets: name -> (image shape, largest pixel value).
IMAGE_PRESETS = {"digits": ((1, 8, 8), 16.0)}


@dataclass(frozen=True)
class ImageStudy:
    """Private, public and test rows of an image preset (each table: ID, pixel columns, label)."""

    name: str
    private: pd.DataFrame
    public: pd.DataFrame
    test: pd.DataFrame
    pixels: list[str]
    shape: tuple[int, int, int]
    scale: float
    label: str
    id_column: str
    classes: list[int]
    client: str = "client"
    server: str = "server"

    def images(self, table: pd.DataFrame) -> np.ndarray:
        """The rows' images ``(n, h, w)`` in [0, 1], in the table's order."""
        return table[self.pixels].to_numpy(dtype=np.float64).reshape(len(table), *self.shape[1:]) / self.scale

    def aligned_labels(self, table: pd.DataFrame) -> np.ndarray:
        return aligned(table[self.id_column], table[self.label].to_numpy())

    def views(self, topology: str, table: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
        """Per-party tables of ``table`` (default: the private rows): vanilla gives the server the IDs and labels
        (the client hands its labels over) and the client the pixels; U-shaped keeps everything at the client."""
        table = self.private if table is None else table
        if topology == "vanilla":
            return {self.server: table[[self.id_column, self.label]], self.client: table.drop(columns=[self.label])}
        if topology == "u_shaped":
            return {self.client: table}
        raise ConfigError(f"image studies run in a vanilla or u_shaped split, not {topology!r}")

    def model_input(self, preprocessor: object) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
        """A differentiable map from images ``(n, ...)`` in [0, 1] to the client model's ``(cat, num)`` inputs, as the
        client's fitted preprocessing computes them (it must be affine: ``scaling="standard"``)."""
        def table(value: float) -> pd.DataFrame:
            return pd.DataFrame(np.full((1, len(self.pixels)), value), columns=self.pixels)

        probe = [preprocessor.transform(table(v))[1][0] for v in (0.0, 1.0, self.scale)]  # type: ignore[attr-defined]
        offset, slope = probe[0].double(), (probe[1] - probe[0]).double()
        if not torch.allclose(probe[2].double(), offset + self.scale * slope, atol=1e-4):
            raise ConfigError("the client's preprocessing is not affine in the pixels; train with scaling='standard'")

        def to_model(images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            flat = images.reshape(len(images), -1)
            num = (offset + slope * (flat.double() * self.scale)).float()
            return torch.zeros(len(images), 0, dtype=torch.long), num

        return to_model


def image_study(name: str = "digits", *, seed: int = 0, public_fraction: float = 0.3) -> ImageStudy:
    """The preset's rows for ``seed``, with ``public_fraction`` of its training rows held apart (stratified)."""
    from sklearn.model_selection import train_test_split

    from vsplit.datasets import preset

    if name not in IMAGE_PRESETS:
        raise ConfigError(f"{name!r} is not an image preset; the image studies run on: {', '.join(IMAGE_PRESETS)}")
    if not 0 < public_fraction < 1:
        raise ConfigError(f"public_fraction must be in (0, 1), got {public_fraction}")
    data = preset(name, seed=seed)
    shape, scale = IMAGE_PRESETS[name]
    table = data.train[data.label_party]
    private, public = train_test_split(table, test_size=public_fraction, stratify=table[data.label],
                                       random_state=seed)
    pixels = [c for c in table.columns if c not in (data.id_column, data.label)]
    return ImageStudy(
        name=name, private=private.reset_index(drop=True), public=public.reset_index(drop=True),
        test=data.test[data.label_party], pixels=pixels, shape=shape, scale=scale, label=data.label,
        id_column=data.id_column, classes=sorted(int(c) for c in table[data.label].unique()),
    )
