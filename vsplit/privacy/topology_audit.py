"""One audit for every topology: what each party sees, the attacks that apply, what the defenses cost.

* ``vertical``: :func:`vsplit.privacy.audit` (label leakage, model completion, feature reconstruction), unchanged.
* ``vanilla`` on an image preset: the server inverts the client's activations at every module cut
  (:mod:`~vsplit.privacy.cut_study`), and a red-team server hijacks training (FSHA) against the client's detectors
  (:mod:`~vsplit.privacy.redteam`).
* ``vanilla`` on a tabular preset: the server reconstructs the client's columns from the activations it receives
  (the vertical audit's reconstruction attack).
* ``u_shaped`` on an image preset: the same inversion study (the server sees the head's activations); on a binary
  tabular preset: the server's label attacks on the gradients the client returns (:mod:`~vsplit.privacy.u_shaped`).

:func:`audit_topology` returns a :class:`TopologyReport` (tables, JSON, pictures); ``vsplit privacy audit
--topology vanilla --preset digits`` prints and writes it.

Example:
    >>> TopologyReport(topology="vanilla", source="digits", sections={}, tables=[("none", "|a|")]).table()
    '## none\\n\\n|a|'
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from vsplit.errors import ConfigError
from vsplit.privacy.report import _atomic_write, _finite

TOPOLOGIES = ("vertical", "vanilla", "u_shaped")
#: The defenses each study runs when none are given.
IMAGE_DEFENSES = ("none", "embedding_noise", "nopeek")
LABEL_DEFENSES = ("none", "clip_noise", "max_norm", "marvell", "label_dp")
FEATURE_DEFENSES = ("none", "embedding_noise", "nopeek")


@dataclass(frozen=True)
class ImageAuditSizes:
    """How big the image studies are (the defaults are the full audit; :meth:`quick` a few minutes)."""

    inversion_epochs: int = 8
    targets: int = 32
    white_box_steps: int = 1500
    black_box_epochs: int = 150
    fsha_runs: int = 5
    honest_runs: int = 10
    fsha_epochs: int = 35
    cuts: tuple[str, ...] | None = None

    @classmethod
    def quick(cls) -> ImageAuditSizes:
        return cls(inversion_epochs=4, targets=16, white_box_steps=400, black_box_epochs=60, fsha_runs=2,
                   honest_runs=2, fsha_epochs=8, cuts=("layers.0", "layers.4", "layers"))


@dataclass
class TopologyReport:
    """An audit of one topology: JSON-ready ``sections``, Markdown ``tables`` and ``pictures`` to draw."""

    topology: str
    source: str
    sections: dict[str, Any]
    tables: list[tuple[str, str]]
    pictures: dict[str, tuple[list, str]] = field(default_factory=dict)

    def table(self) -> str:
        return "\n\n".join(f"## {heading}\n\n{text}" for heading, text in self.tables)

    def to_json(self) -> str:
        return json.dumps(_finite(self.sections), indent=2)

    def write(self, directory: str | os.PathLike) -> dict[str, Path]:
        """Write ``report.md``, ``report.json`` and each picture (PNG) to ``directory``."""
        from vsplit.privacy.pictures import write_grid

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        markdown = f"# Privacy audit: {self.source}, {self.topology} split\n\n{self.table()}\n"
        paths = {
            "markdown": _atomic_write(out / "report.md", lambda f: f.write(markdown.encode())),
            "json": _atomic_write(out / "report.json", lambda f: f.write(self.to_json().encode())),
        }
        for name, (blocks, title) in self.pictures.items():
            paths[name] = write_grid(out / name, blocks, title=title)
        return paths


def _cell(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and not np.isfinite(value)):
        return "–"
    return fmt.format(value)


def inversion_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown: one line per defense and cut (means over seeds)."""
    head = ["defense", "cut", "values", "accuracy", "cost (pts)", "white-box SSIM", "white-box PSNR",
            "black-box SSIM", "black-box PSNR"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["defense"], f"`{r['cut']}`", str(int(r["values"])), _cell(r["accuracy"], "{:.3f}"),
                 _cell(100 * r["accuracy_cost"], "{:+.1f}"), _cell(r["white_box_ssim"], "{:.3f}"),
                 _cell(r["white_box_psnr"], "{:.1f}"), _cell(r["black_box_ssim"], "{:.3f}"),
                 _cell(r["black_box_psnr"], "{:.1f}")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def detector_table(summary: dict[str, Any]) -> str:
    head = ["detector", "FSHA runs flagged", "median detection step", "before SSIM 0.3", "before beating the prior",
            "false alarms (honest runs)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in summary.items():
        n = s["fsha_runs"]
        cells = [name, f"{s['fsha_detected']}/{n}", _cell(s["median_detection_step"], "{:.0f}"),
                 f"{s['detected_before_ssim_0.3']}/{n}", f"{s['detected_before_beating_prior']}/{n}",
                 f"{s['false_alarms']}/{s['honest_runs']}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fsha_curve(runs: Sequence[dict[str, Any]], steps: Sequence[int]) -> list[dict[str, Any]]:
    """Mean (min, max) over FSHA runs of the SSIM of what the server reconstructs, at each of ``steps``."""
    out = []
    for step in steps:
        values = [h["ssim"] for run in runs for h in run["history"] if h["step"] == step]
        if values:
            out.append({"step": step, "ssim_mean": float(np.mean(values)), "ssim_min": float(np.min(values)),
                        "ssim_max": float(np.max(values)), "runs": len(values)})
    return out


def fsha_blocks(run: dict[str, Any], *, show: int = 6) -> list:
    """Picture blocks of one FSHA run: per kept step, the batch's images and what the server reconstructs."""
    rows = []
    ssim_at = {h["step"]: h["ssim"] for h in run["history"]}
    for step, (truth, seen) in sorted(run["snapshots"].items()):
        rows.append((f"step {step}: original", truth[:show]))
        rows.append((f"server sees (SSIM {ssim_at.get(step, float('nan')):.2f})", seen[:show]))
    return [(f"FSHA, seed {run['seed']}", rows)]


def _light(run: dict[str, Any]) -> dict[str, Any]:
    """A run without its pictures, error object and per-step history (kept as a curve elsewhere)."""
    return {k: v for k, v in run.items() if k not in ("snapshots", "error", "history")}


def vanilla_image_audit(
    preset_name: str,
    *,
    defenses: Sequence[str] = IMAGE_DEFENSES,
    seeds: Sequence[int] = (0, 1, 2),
    sizes: ImageAuditSizes = ImageAuditSizes(),
    topology: str = "vanilla",
    inversion: bool = True,
    red_team: bool = True,
    progress: Callable[[str], None] | None = None,
) -> TopologyReport:
    """Inversion by cut depth and, in a vanilla split, FSHA against the detectors, on an image preset."""
    report = TopologyReport(topology=topology, source=preset_name, sections={}, tables=[])
    if inversion:
        _inversion(report, preset_name, defenses=defenses, seeds=seeds, sizes=sizes, progress=progress)
    if red_team and topology == "vanilla":
        _red_team(report, preset_name, sizes=sizes, progress=progress)
    return report


def _inversion(report: TopologyReport, preset_name: str, *, defenses: Sequence[str], seeds: Sequence[int],
               sizes: ImageAuditSizes, progress: Callable[[str], None] | None) -> None:
    from vsplit.privacy.cut_study import guesses, inversion_by_cut, picture_blocks, summarise, target_images
    from vsplit.privacy.image_data import image_study

    topology = report.topology
    runs, pictures = inversion_by_cut(
        lambda s: image_study(preset_name, seed=s), defenses=defenses, seeds=seeds, topology=topology,
        cuts=sizes.cuts, epochs=sizes.inversion_epochs, targets=sizes.targets,
        white_box_steps=sizes.white_box_steps, black_box_epochs=sizes.black_box_epochs, progress=progress,
    )
    rows = summarise(runs)
    per_seed = []
    for seed in seeds:
        study = image_study(preset_name, seed=seed)
        per_seed.append(guesses(study, target_images(study, seed, sizes.targets), seed=seed))
    baseline = {k: float(np.mean([g[k] for g in per_seed])) for k in per_seed[0]}
    report.sections["inversion"] = {"rows": rows, "runs": runs, "guesses": baseline, "settings": {
        "seeds": list(seeds), "defenses": list(defenses), "topology": topology, **sizes.__dict__}}
    report.tables.append((f"Inversion of the client's activations by the server ({topology}), means over "
                          f"{len(seeds)} seeds", inversion_table(rows) + f"\n\nGuesses that know nothing of the "
                          f"image: the mean public image scores SSIM {baseline['mean_image_ssim']:.3f}, a random "
                          f"public image {baseline['random_image_ssim']:.3f}."))
    title = (f"{preset_name}: originals and the server's reconstructions at each cut ({topology} split, seed "
             f"{seeds[0]}); one block per defense")
    report.pictures["inversion_by_cut.png"] = (picture_blocks(pictures), title)


def _red_team(report: TopologyReport, preset_name: str, *, sizes: ImageAuditSizes,
              progress: Callable[[str], None] | None) -> None:
    from vsplit.privacy.image_data import image_study
    from vsplit.privacy.redteam import SNAPSHOTS, run_split, summarise_detectors

    fsha, honest = [], []
    for seed in range(max(sizes.fsha_runs, sizes.honest_runs)):
        study = image_study(preset_name, seed=seed)
        if seed < sizes.fsha_runs:
            fsha.append(run_split(study, seed=seed, epochs=sizes.fsha_epochs, attack=True))
            if progress is not None:
                found = {k: v["step"] for k, v in fsha[-1]["detections"].items()}
                progress(f"FSHA seed {seed}: detections {found}, SSIM 0.3 at step {fsha[-1]['first_step_ssim_0.3']}, "
                         f"beats the prior at step {fsha[-1]['first_step_beating_prior']}")
        if seed < sizes.honest_runs:
            honest.append(run_split(study, seed=seed, epochs=sizes.fsha_epochs, attack=False))
            if progress is not None:
                found = {k: v["step"] for k, v in honest[-1]["detections"].items()}
                progress(f"honest seed {seed}: alarms {found}, accuracy {honest[-1]['accuracy']:.3f}")
    plain = [run_split(image_study(preset_name, seed=r["seed"]), seed=r["seed"], epochs=sizes.fsha_epochs,
                       attack=False, detectors=()) for r in honest[:3]]
    canary_cost = {
        "seeds": [r["seed"] for r in plain],
        "accuracy_with_canaries": float(np.mean([r["accuracy"] for r in honest[: len(plain)]])),
        "accuracy_without_canaries": float(np.mean([r["accuracy"] for r in plain])),
    }
    summary = summarise_detectors(fsha, honest)
    steps = sorted({h["step"] for run in fsha for h in run["history"]} & {*SNAPSHOTS, *range(0, 10_000, 25)})
    curve = fsha_curve(fsha, steps)
    report.sections["detectors"] = {"summary": summary, "fsha_curve": curve, "splitguard_canary_cost": canary_cost,
                                    "fsha_runs": [_light(r) for r in fsha],
                                    "honest_runs": [_light(r) for r in honest],
                                    "settings": {"fsha_epochs": sizes.fsha_epochs}}
    report.tables.append((f"Detectors at the client: FSHA ({len(fsha)} runs) and honest training ({len(honest)} runs)",
                          detector_table(summary) + f"\n\nSplitGuard's canary rows: honest test accuracy "
                          f"{canary_cost['accuracy_with_canaries']:.3f} with them, "
                          f"{canary_cost['accuracy_without_canaries']:.3f} without (seeds {canary_cost['seeds']})."))
    lines = ["| step | SSIM mean | min | max |", "|---|---|---|---|"]
    lines += [f"| {c['step']} | {c['ssim_mean']:.3f} | {c['ssim_min']:.3f} | {c['ssim_max']:.3f} |"
              for c in curve if c["step"] in SNAPSHOTS or c["step"] % 100 == 0]
    prior = float(np.mean([r["prior_ssim"] for r in fsha]))
    report.tables.append((f"What the FSHA server reconstructs, SSIM over steps (the mean public image scores "
                          f"{prior:.3f})", "\n".join(lines)))
    report.pictures["fsha.png"] = (fsha_blocks(fsha[0]), f"{preset_name}: FSHA, what the server reconstructs from the "
                                   "activations of the batch it receives, by training step")


def audit_topology(
    topology: str,
    preset_name: str,
    *,
    defenses: Sequence[str] | None = None,
    seeds: int | Sequence[int] = 3,
    epochs: int | None = None,
    batch_size: int | None = None,
    sizes: ImageAuditSizes | None = None,
    progress: Callable[[str], None] | None = None,
) -> Any:
    """The audit of ``preset_name`` split as ``topology``: an :class:`~vsplit.privacy.report.AuditReport` for the
    tabular audits, a :class:`TopologyReport` for the image studies."""
    from vsplit.privacy.image_data import IMAGE_PRESETS

    if topology not in TOPOLOGIES:
        raise ConfigError(f"unknown topology {topology!r}; choose one of: {', '.join(TOPOLOGIES)}")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    if topology == "vertical":
        from vsplit.privacy import DEFAULT_AUDIT_DEFENSES, audit

        return audit(preset_name, defenses=defenses or list(DEFAULT_AUDIT_DEFENSES), seeds=seed_list, epochs=epochs,
                     batch_size=batch_size, progress=progress)
    if preset_name in IMAGE_PRESETS:
        base = sizes or ImageAuditSizes()
        if epochs is not None:
            base = ImageAuditSizes(**{**base.__dict__, "inversion_epochs": epochs})
        return vanilla_image_audit(preset_name, defenses=defenses or IMAGE_DEFENSES, seeds=seed_list, sizes=base,
                                   topology=topology, progress=progress)
    if topology == "u_shaped":
        from vsplit.privacy.u_shaped import u_shaped_audit

        return u_shaped_audit(preset_name, defenses=defenses or LABEL_DEFENSES, seeds=seed_list,
                              epochs=epochs or 10, batch_size=batch_size or 256, progress=progress)
    return vanilla_tabular_audit(preset_name, defenses=defenses or FEATURE_DEFENSES, seeds=seed_list, epochs=epochs,
                                 batch_size=batch_size, progress=progress)


def vanilla_tabular_audit(
    preset_name: str,
    *,
    defenses: Sequence[str] = ("none", "embedding_noise", "nopeek"),
    seeds: Sequence[int] = (0, 1, 2),
    epochs: int | None = None,
    batch_size: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Any:
    """A vanilla split of a tabular preset: the client holds every feature column (the preset's pooled table), the
    server the labels; the server reconstructs the client's columns from the activations it receives (the vertical
    audit's reconstruction attack, on 200 rows it knows). Label attacks do not apply: the server holds the labels."""
    from vsplit.datasets import preset
    from vsplit.privacy.audit import AuditData, audit

    def source(seed: int) -> AuditData:
        data = preset(preset_name, seed=seed)

        def views(table: Any) -> dict[str, Any]:
            return {"server": table[[data.id_column, data.label]], "client": table.drop(columns=[data.label])}

        return AuditData(name=f"{preset_name} (vanilla)", train=views(data.pooled("train")),
                         test=views(data.pooled("test")), label_party="server", label=data.label,
                         positive_label=data.positive_label)

    return audit(source, defenses=defenses, seeds=seeds, epochs=epochs, batch_size=batch_size,
                 attacks=["reconstruction"], estimator={"topology": "vanilla"}, progress=progress)
