"""Inversion by cut depth: cut the client's image model at each module boundary (with the cut-layer planner), train
the split there, and invert what the server receives, white-box and black-box, undefended and under each defense.

Theory of operation. :func:`module_cuts` asks :func:`vsplit.plan.plan_cuts` for every module cut of the client's
model (not the raw input, and not a cut after a module that only reshapes); ``plan.split(cut)`` gives the two halves.
For each cut, defense and seed, :func:`train_at_cut` trains a vanilla (or U-shaped) split on the real engine: the
client runs the planner's client half (its crossing tensor flattened), the server the planner's server half and the
layers after it. Then the server attacks the activations it received for the client's training images, computed
with the final weights and the client's defense exactly as in training (embedding noise drawn, clipping applied):

* white-box (:func:`~vsplit.privacy.attacks.inversion.white_box_inversion`): the attacker knows the client half,
  its weights and preprocessing, and the defense's deterministic part (clipping); not the noise;
* black-box (:func:`~vsplit.privacy.attacks.inversion.black_box_inversion`): an inverse network trained on the
  attacker's public images and the activations the client half (with its defense) gives them.

Each run reports the test accuracy (the defense's cost) and the reconstructions' pixel MSE, PSNR and SSIM.

Example:
    >>> from vsplit.models.segments import ImageHead
    >>> [c for c, _ in module_cuts(ImageHead(channels=(4,)), (1, 8, 8))]
    ['layers.0', 'layers.1', 'layers.2']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from vsplit.models.segments import MLP, ImageHead
from vsplit.privacy.attacks.inversion import black_box_inversion, white_box_inversion
from vsplit.privacy.defenses import Defense, make_defense
from vsplit.privacy.image_data import ImageStudy
from vsplit.privacy.images import quality
from vsplit.protocol.training.hooks import StepInfo, TrainingHooks
from vsplit.topology.graph import Topology

#: Modules whose output holds the same values as their input: no cut of its own.
RESHAPES = (nn.Flatten, nn.Identity, nn.Unflatten)


def _example(shape: Sequence[int], n: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.zeros(n, 0, dtype=torch.long), torch.rand(n, int(np.prod(shape)))


def module_cuts(head: nn.Module, shape: Sequence[int]) -> list[tuple[str, tuple[int, ...]]]:
    """The planner's module cuts of ``head`` (called ``head(cat, num)``) with the per-sample shape that crosses."""
    from vsplit.plan import plan_cuts

    plan = plan_cuts(head, _example(shape))
    out = []
    for row in plan.rows:
        if row.raw_input_crosses or len(row.tensors) != 1:
            continue
        names = [row.after, *row.aliases]
        modules = [head.get_submodule(n) for n in names if n != "(input)"]
        if any(isinstance(m, RESHAPES) for m in modules):
            continue
        out.append((row.after, tuple(row.tensors[0].shape[1:])))
    return out


class CutClient(nn.Module):
    """The planner's client half, its one crossing tensor flattened (what a topology's cut carries)."""

    def __init__(self, half: nn.Module) -> None:
        super().__init__()
        self.front = half

    def forward(self, cat: torch.Tensor, num: torch.Tensor) -> torch.Tensor:
        (crossing,) = self.front(cat, num)
        return crossing.flatten(1)


class CutServer(nn.Module):
    """The planner's server half on the flattened crossing tensor, then ``rest`` (the layers after the model)."""

    def __init__(self, half: nn.Module, shape: Sequence[int], rest: nn.Module) -> None:
        super().__init__()
        self.back, self.shape, self.rest = half, tuple(shape), rest

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.rest(self.back((z.reshape(len(z), *self.shape),)))


@dataclass
class CutRun:
    """One trained split at one cut: the client's half, the defense's hooks, the fitted estimator and accuracy."""

    cut: str
    shape: tuple[int, ...]
    client: CutClient
    hooks: TrainingHooks
    estimator: Any
    accuracy: float


#: Width of the linear bottleneck that ends the study's client model.
BOTTLENECK = 16


def make_head(seed: int, shape: Sequence[int]) -> ImageHead:
    """The study's client model: the digits CNN :class:`~vsplit.models.segments.ImageHead` (two convolutions, a
    pool) ended by a linear bottleneck of :data:`BOTTLENECK` values, seeded. Without it the deepest cut would still
    carry 256 values for 64 pixels; with it the cuts range from 1,024 values down to 16."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return ImageHead(shape=shape, out_dim=BOTTLENECK)


def train_at_cut(
    study: ImageStudy,
    cut: str,
    *,
    defense: str | Defense = "none",
    seed: int = 0,
    topology: str = "vanilla",
    epochs: int = 8,
    batch_size: int = 64,
    lr: float = 3e-3,
    head_factory: Callable[[int, Sequence[int]], nn.Module] = make_head,
) -> CutRun:
    """Train the split of the client model cut after module ``cut`` on the study's private rows."""
    from vsplit.estimator import SplitClassifier
    from vsplit.plan import plan_cuts

    head = head_factory(seed, study.shape)
    width_out = int(head(*_example(study.shape, 2)).shape[1])
    plan = plan_cuts(head, _example(study.shape))
    client_half, server_half = plan.split(cut)
    shape = tuple(plan.row(cut).tensors[0].shape[1:])
    width = int(np.prod(shape))
    n_classes = len(study.classes)
    client = CutClient(client_half)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed + 1)
        if topology == "vanilla":
            top = CutServer(server_half, shape, MLP(width_out, hidden=(32,), out_dim=n_classes))
            segments = {"bottom": client, "top": top}
            split = Topology.vanilla(client=study.client, server=study.server, width=width)
        else:
            middle = CutServer(server_half, shape, MLP(width_out, hidden=(), out_dim=32, final_activation=True))
            segments = {"head": client, "middle": middle}
            split = Topology.u_shaped(client=study.client, server=study.server, widths=(width, 32))
    defense = make_defense(defense)
    hooks = defense.hooks(feature_parties=[study.client], seed=seed)
    label_party = study.server if topology == "vanilla" else study.client
    clf = SplitClassifier(
        label_party=label_party, label=study.label, task="multiclass", topology=split, epochs=epochs,
        batch_size=batch_size, lr=lr, scaling="standard", segments=segments, hooks=hooks, patience=None,
        random_state=seed, alignment="join", reset_modules=False,  # the halves as seeded above
    ).fit(study.views(topology))
    accuracy = float(clf.evaluate(study.views(topology, study.test))["accuracy"])
    return CutRun(cut=cut, shape=shape, client=client, hooks=hooks, estimator=clf, accuracy=accuracy)


def sent(run: CutRun, party: str, inputs: tuple[torch.Tensor, torch.Tensor], *, training: bool) -> torch.Tensor:
    """What the client sends for ``inputs``: its half, then its defense's embedding hooks (noise only in training)."""
    z = run.client(*inputs)
    info = StepInfo(party=party, epoch=0, step=0, rows=None, training=training)
    for hook in run.hooks.embedding_hooks.get(party, ()):
        z = hook(z, info)
    return z


def attack_run(
    study: ImageStudy,
    run: CutRun,
    *,
    targets: np.ndarray,
    white_box_steps: int = 1500,
    black_box_epochs: int = 150,
    aux_rows: int | None = None,
    seed: int = 0,
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """White-box and black-box inversion of what the server received for the ``targets`` images (n, h, w): the
    accuracy and both attacks' quality, and the reconstructions (``white_box``, ``black_box``)."""
    party = study.client
    clf = run.estimator
    client_party = clf.feature_parties_.get(party) or clf.label_party_
    to_model = study.model_input(client_party.preprocessor)
    run.client.eval()
    with torch.no_grad():
        observed = sent(run, party, to_model(torch.from_numpy(targets).float()), training=True)

    def forward(images: torch.Tensor) -> torch.Tensor:
        return sent(run, party, to_model(images), training=False)  # clipping is known; the noise is not

    white = white_box_inversion(forward, observed, shape=study.shape[1:], steps=white_box_steps)
    public = study.images(study.public)
    if aux_rows is not None:
        public = public[np.random.default_rng(seed).permutation(len(public))[:aux_rows]]
    public_t = torch.from_numpy(public).float()
    with torch.no_grad():
        aux = sent(run, party, to_model(public_t), training=True)
    black = black_box_inversion(aux, public_t, observed, epochs=black_box_epochs, seed=seed)
    out: dict[str, Any] = {"cut": run.cut, "values": int(np.prod(run.shape)), "accuracy": run.accuracy}
    out |= {f"white_box_{k}": v for k, v in quality(targets, white).items()}
    out |= {f"black_box_{k}": v for k, v in quality(targets, black).items()}
    return out, {"white_box": white, "black_box": black}


def inversion_by_cut(
    study_for: Callable[[int], ImageStudy],
    *,
    defenses: Sequence[str] = ("none", "embedding_noise", "nopeek"),
    seeds: Sequence[int] = (0,),
    topology: str = "vanilla",
    cuts: Sequence[str] | None = None,
    epochs: int = 8,
    targets: int = 32,
    white_box_steps: int = 1500,
    black_box_epochs: int = 150,
    head_factory: Callable[[int, Sequence[int]], nn.Module] = make_head,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every (defense, seed, cut): accuracy and both attacks' quality; and the first seed's pictures.

    Returns ``(runs, pictures)``: ``runs`` one dict per run, ``pictures[defense]`` the originals and each cut's
    white-box and black-box reconstructions of the first seed (for :func:`vsplit.privacy.pictures.write_grid`).
    """
    runs: list[dict[str, Any]] = []
    pictures: dict[str, Any] = {}
    for seed in seeds:
        study = study_for(seed)
        chosen = list(cuts) if cuts is not None else [
            c for c, _ in module_cuts(head_factory(seed, study.shape), study.shape)]
        images = target_images(study, seed, targets)
        for config in defenses:
            for depth, cut in enumerate(chosen):
                run = train_at_cut(study, cut, defense=config, seed=seed, topology=topology, epochs=epochs,
                                   head_factory=head_factory)
                result, shown = attack_run(study, run, targets=images, white_box_steps=white_box_steps,
                                           black_box_epochs=black_box_epochs, seed=seed)
                if seed == seeds[0]:
                    block = pictures.setdefault(config, {"original": images, "cuts": {}})
                    block["cuts"][cut] = shown
                runs.append({"defense": config, "seed": seed, "depth": depth, **result})
                if progress is not None:
                    progress(f"inversion seed {seed} {config} {cut}: accuracy {result['accuracy']:.3f}, white-box "
                             f"SSIM {result['white_box_ssim']:.3f}, black-box SSIM {result['black_box_ssim']:.3f}")
    return runs, pictures


def target_images(study: ImageStudy, seed: int, n: int) -> np.ndarray:
    """The ``n`` client training images the server's attacks are scored on (a seeded choice)."""
    order = np.random.default_rng(seed).permutation(len(study.private))[:n]
    return study.images(study.private.iloc[order])


def guesses(study: ImageStudy, targets: np.ndarray, *, seed: int = 0) -> dict[str, float]:
    """What guesses that know nothing about the targets score: the mean public image, and a random public image
    (SSIM, PSNR); the level an inversion must beat to tell the server anything about an image."""
    public = study.images(study.public)
    mean = np.broadcast_to(public.mean(0), targets.shape)
    other = public[np.random.default_rng(seed).integers(len(public), size=len(targets))]
    a, b = quality(targets, mean), quality(targets, other)
    return {"mean_image_ssim": a["ssim"], "mean_image_psnr": a["psnr"], "random_image_ssim": b["ssim"],
            "random_image_psnr": b["psnr"]}


def summarise(runs: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Means over seeds per (defense, cut), with the accuracy cost against ``none`` at the same cut and seeds."""
    keys = [k for k in runs[0] if k not in ("defense", "seed", "cut", "depth")] if runs else []
    baseline = {(r["cut"], r["seed"]): r["accuracy"] for r in runs if r["defense"] == "none"}
    rows = []
    for defense in dict.fromkeys(r["defense"] for r in runs):
        for cut in dict.fromkeys(r["cut"] for r in runs):
            group = [r for r in runs if r["defense"] == defense and r["cut"] == cut]
            if not group:
                continue
            row: dict[str, Any] = {"defense": defense, "cut": cut, "depth": group[0]["depth"], "n_seeds": len(group)}
            row |= {k: float(np.mean([r[k] for r in group])) for k in keys}
            costs = [baseline[(cut, r["seed"])] - r["accuracy"] for r in group if (cut, r["seed"]) in baseline]
            row["accuracy_cost"] = float(np.mean(costs)) if costs else float("nan")
            rows.append(row)
    return rows


def picture_blocks(pictures: dict[str, Any], *, show: int = 6) -> list:
    """:func:`~vsplit.privacy.pictures.write_grid` blocks: per defense, the originals and each cut's attempts."""
    blocks = []
    for defense, block in pictures.items():
        rows = [("original", block["original"][:show])]
        for cut, shown in block["cuts"].items():
            rows.append((f"white-box {cut}", shown["white_box"][:show]))
            rows.append((f"black-box {cut}", shown["black_box"][:show]))
        blocks.append((defense, rows))
    return blocks
