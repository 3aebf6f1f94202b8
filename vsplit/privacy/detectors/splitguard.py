"""SplitGuard (Erdogan, Küpçü and Çiçek, "SplitGuard: Detecting and Mitigating Training-Hijacking Attacks in Split
Learning", WPES 2022), at the client, with fake-label *rows* in place of fake-label batches.

Theory of operation. An honest server trains on the labels it is given, so once it has learnt a little, examples
with wrong labels get gradients unlike those of correctly labelled ones: larger (their loss is high) and pointing
elsewhere. A hijacking server ignores the labels, so fake-labelled examples get the same kind of gradient as the
others. SplitGuard sends fake-label batches now and then and compares their mean gradient with that of regular ones.

In vsplit's vanilla split the client hands its labels to the server once, before training, so it cannot relabel a
batch on the fly. Instead :func:`plant_canaries` adds *canary rows*: copies of a few of the client's own images under
fresh IDs, each with a label other than its true one. The server cannot tell them from other customers; an image and
its canary carry different labels, so an honest model cannot fit both and the canaries' gradients keep showing the
label effect all through training. Per batch the detector compares the mean gradient of the batch's canaries ``F``
with that of the other rows: ``d(A, B) = angle(Ā, B̄)/π + |log(‖Ā‖/‖B̄‖)|``, and the score is ``d(F, R) − d(S, R)``
for a random set ``S`` of as many regular rows (``R``: the regular rows not in ``S``), so that under a server that
ignores labels the score is zero on average whatever the group sizes. The detector fires when, after ``start``
batches (an honest model must first learn something), the mean score of the last ``window`` batches with canaries
is below ``threshold``. The canaries cost some accuracy (they are label noise, about ``fraction`` of the rows); the
audit measures it.

Example:
    >>> import numpy as np, pandas as pd
    >>> client = pd.DataFrame({"customer_id": ["d01", "d02", "d03", "d04"], "px": [0.0, 1.0, 2.0, 3.0]})
    >>> server = pd.DataFrame({"customer_id": ["d01", "d02", "d03", "d04"], "digit": [0, 1, 2, 3]})
    >>> c, s, canary_ids = plant_canaries(client, server, fraction=0.5, seed=0, label="digit", classes=range(4))
    >>> len(c), len(s), len(canary_ids), bool(set(canary_ids) <= set(s["customer_id"]))
    (6, 6, 2, True)
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd
import torch

from vsplit.errors import ConfigError
from vsplit.privacy.detectors.base import DETECTORS, Detector


def _fresh_ids(existing: set[str], n: int, rng: np.random.Generator) -> list[str]:
    """``n`` new IDs shaped like existing ones (each digit of a random existing ID redrawn), none already used."""
    templates = sorted(existing)
    out: list[str] = []
    taken = set(existing)
    while len(out) < n:
        template = templates[int(rng.integers(len(templates)))]
        new = "".join(str(rng.integers(10)) if ch.isdigit() else ch for ch in template)
        if new not in taken:
            taken.add(new)
            out.append(new)
    return out


def plant_canaries(
    client: pd.DataFrame,
    server: pd.DataFrame,
    *,
    fraction: float,
    seed: int,
    label: str,
    classes: Iterable[object],
    id_column: str = "customer_id",
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The client's table and the labels it hands the server, with canary rows added; and the canaries' IDs.

    ``fraction`` of the client's rows (at least one) are copied under fresh IDs; each copy's label, in ``server``,
    is drawn uniformly from ``classes`` other than the original's. Rows are shuffled so canaries are not at the end.
    """
    if not 0 < fraction < 1:
        raise ConfigError(f"plant_canaries: fraction must be in (0, 1), got {fraction}")
    rng = np.random.default_rng(seed)
    classes = list(classes)
    n = max(1, round(fraction * len(client)))
    picked = client.iloc[np.sort(rng.choice(len(client), size=n, replace=False))]
    ids = _fresh_ids(set(map(str, client[id_column])) | set(map(str, server[id_column])), n, rng)
    truth = server.set_index(id_column)[label].reindex(picked[id_column]).to_numpy()
    fake = [classes[(classes.index(t) + int(rng.integers(1, len(classes)))) % len(classes)] for t in truth]
    copies = picked.assign(**{id_column: ids})
    labels = pd.DataFrame({id_column: ids, label: pd.array(fake, dtype=server[label].dtype)})
    client_out = pd.concat([client, copies], ignore_index=True)
    server_out = pd.concat([server, labels[server.columns]], ignore_index=True)
    order = rng.permutation(len(client_out))
    return client_out.iloc[order].reset_index(drop=True), server_out.iloc[order].reset_index(drop=True), ids


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    """``angle(ā, b̄)/π + |log(‖ā‖/‖b̄‖)|`` of two groups' mean gradients."""
    ma, mb = a.mean(0), b.mean(0)
    na, nb = float(ma.norm()), float(mb.norm())
    if na == 0 or nb == 0:
        return 0.0
    cos = float(torch.clamp(ma @ mb / (na * nb), -1.0, 1.0))
    return float(np.arccos(cos) / np.pi + abs(np.log(na / nb)))


@DETECTORS.register("splitguard")
class SplitGuard(Detector):
    """Fires when canary rows (fake labels) get gradients like everyone else's.

    Args:
        start: batches before the first decision (an honest server must first learn a little).
        window: batches with canaries whose mean score is compared with ``threshold``.
        threshold: fire when that mean score is below this.
        seed: seeds the choice of the comparison rows ``S``.
        stop: raise on detection (default) or only record.
    """

    name = "splitguard"

    def __init__(
        self, *, start: int = 50, window: int = 20, threshold: float = 0.1, seed: int = 0, stop: bool = True
    ) -> None:
        super().__init__(stop=stop)
        if start < 0 or window < 1:
            raise ConfigError("splitguard: start must be >= 0 and window >= 1")
        self.start, self.window, self.threshold = start, window, threshold
        self.generator = np.random.default_rng(seed)

    def statistic(self, grads: torch.Tensor, rows: np.ndarray) -> tuple[float, dict[str, float]] | None:
        if self.canaries is None:
            raise ConfigError("splitguard: bind(canaries=...) with the rows plant_canaries added")
        fake = self.canaries[rows]
        k = int(fake.sum())
        regular = np.flatnonzero(~fake)
        if k == 0 or len(regular) < 2 * k:
            return None
        chosen = self.generator.permutation(regular)
        s, rest = torch.from_numpy(chosen[:k]), torch.from_numpy(chosen[k:])
        f = torch.from_numpy(np.flatnonzero(fake))
        d_fake, d_same = _distance(grads[f], grads[rest]), _distance(grads[s], grads[rest])
        return d_fake - d_same, {"fake": d_fake, "regular": d_same}

    def judge(self) -> tuple[float, float, str] | None:
        if self.batches <= self.start or len(self.history) < self.window:
            return None
        recent = [r.value for r in self.history[-self.window :]]
        score = float(np.mean(recent))
        if score >= self.threshold:
            return None
        return score, self.threshold, (
            f"canary rows with fake labels get gradients like the others (SplitGuard score {score:.3f}, mean of the "
            f"last {self.window} batches with canaries, below {self.threshold}): the server's gradients ignore labels"
        )
