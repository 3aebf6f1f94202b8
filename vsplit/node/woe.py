"""A party's part of WOE binning and the value report between organizations (``vsplit bin --config party.toml``).

Theory of operation. :class:`WoeNode` is a node without a model: it reads the party's own table, aligns the
customers with the peers by the same PSI as training (:class:`~vsplit.node.aligned.AlignedNode`'s settings; its
progress under ``psi-state/bin``), bins its own attributes on the aligned rows (:mod:`vsplit.woe.fine`) and runs the
machines of :mod:`vsplit.woe` over mutual TLS, in a session of its own (the run id and ``:bin``). It keeps no
checkpoint: a run takes seconds to a minute, and a failed one is run again.

What it writes in the party's run folder, atomically: ``woe.npz`` (its own :class:`~vsplit.woe.maps.WoeMap` per
attribute: :func:`load_binning` reads it back), ``woe.json`` (its attributes' IV and the selection) and
``selected.json`` (the attributes a later training takes: ``[woe] select_min_iv``, ``select_top_k``). The label
party also writes ``value_report.md``, ``value_report.html`` and ``iv.png`` (:mod:`vsplit.woe.report`) and, in
``woe.json``, every party's binning tables. With ``[woe] report_gini`` (on every party) two more stages follow the
binning: a joint scorecard across the cut and its scoring round, for the report's Gini of the bank alone against the
joint scorecard on held-out rows (:mod:`vsplit.woe.gini`; ``woe.json``'s ``gini``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from vsplit.config import PartyConfig
from vsplit.config.boosting import small_keys_allowed
from vsplit.errors import CheckpointError, ConfigError
from vsplit.node.aligned import psi_summary
from vsplit.node.own_table import OwnTableNode
from vsplit.runtime.checkpoint import interpreting, load_checkpoint, save_checkpoint


def load_binning(folder: Path, *, run_id: str, party: str) -> Any:
    """A party's :class:`~vsplit.woe.result.PartyBinning` from the ``woe.npz`` ``vsplit bin`` wrote in ``folder``.

    Raises:
        CheckpointError: no binning there, or another run's or party's.
    """
    from vsplit.woe.maps import WoeMap
    from vsplit.woe.result import PartyBinning

    path = folder / "woe.npz"
    if not path.is_file():
        raise CheckpointError(f"{party}: no binning at {path}; run `vsplit bin --config ...` on every party first")
    state = load_checkpoint(path, run_id=run_id, party=party)
    with interpreting(path):
        maps = [WoeMap.from_state(m) for m in state["maps"]]
        iv = {str(k): float(v) for k, v in zip(state["attributes"], state["iv"], strict=True)}
    return PartyBinning(maps=maps, iv=iv)


class WoeNode(OwnTableNode):
    """Runs one party of ``vsplit bin`` as configured by ``config`` (a vertical split's party config)."""

    needs_he = "vsplit bin"

    def __init__(self, config: PartyConfig, *, progress: bool = True) -> None:
        role = config.party.role
        if config.topology.kind != "vertical" or role == "compute":
            raise ConfigError(f"topology.kind: `vsplit bin` runs in a vertical split with a label party and feature "
                              f"parties; this config is {config.topology.kind!r}, role {role!r}")
        super().__init__(config, resume=False, progress=progress)
        self.binning: Any = None
        self.report: Any = None

    def pump_options(self) -> dict[str, Any]:
        return {"purpose": ":bin"}  # frames of a training run under the same run id are refused

    def session(self) -> Any:
        """PSI, then the binning; its outcome is the alignment."""
        from vsplit.app.session import psi_machine
        from vsplit.psi.alignment import canonical_rows

        self._psi_backend = self.open_psi_backend()
        try:
            ids = self.table[self.config.data.id_column]
            alignment = yield "psi", psi_machine(self.name, self.topology, ids, self.psi_settings("bin"))
            rows = canonical_rows(alignment)
            backend = self._backend()
            try:
                result = yield "bin", self._machine(rows, backend)
            finally:
                backend.close()
            if self.role == "label":
                self.report, self.binning = result, result.own
            else:
                self.binning = result
            if self.config.woe.report_gini and (self.role != "label" or self.partners):
                compared = yield from self._gini(rows)
                if self.report is not None:
                    from vsplit.woe.gini import add_to_report

                    add_to_report(self.report, compared)
            return alignment
        finally:
            if self._psi_backend is not None:
                self._psi_backend.close()
                self._psi_backend = None

    def _gini(self, rows: np.ndarray) -> Any:
        """``[woe] report_gini``: this party's stages of the bank-only against joint scorecard comparison
        (:mod:`vsplit.woe.gini`) on its selected attributes (every one if it selects none); the label party's outcome
        is the comparison."""
        from vsplit.config.scorecard import scorecard_params
        from vsplit.scorecard import columns_from_maps
        from vsplit.woe.gini import label_stages, partner_stages

        w, d = self.config.woe, self.config.data
        chosen = self.binning.select(min_iv=w.select_min_iv, top_k=w.select_top_k) or self.binning.attributes
        by_name = {m.name: m for m in self.binning.maps}
        columns = columns_from_maps([by_name[a] for a in chosen], self.table.iloc[rows].reset_index(drop=True))
        small = {"insecure_small_key_for_tests": small_keys_allowed()}
        if self.role != "label":
            yield from partner_stages(columns, label=self.hub, schemes=("ou", "paillier"), min_key_bits=w.key_bits,
                                      **small)
            return None
        from vsplit.woe.notebook import labels_of

        assert d.label is not None
        labels = labels_of(self.table[d.label].iloc[rows].reset_index(drop=True), name=d.label, party=self.name,
                           positive_label=d.positive_label)
        params, scaling = scorecard_params(self.config)
        return (yield from label_stages(columns, labels=labels, partners=self.partners, params=params,
                                        scaling=scaling, share=w.validation_share, seed=self.config.train.seed,
                                        name=self.name, scheme=w.scheme, key_bits=w.key_bits, **small))

    def _backend(self) -> Any:
        from vsplit.boosting.backend import ProcessBackend, SerialBackend

        workers = self.config.woe.workers
        return ProcessBackend(workers=workers) if workers > 1 else SerialBackend()

    def _machine(self, rows: np.ndarray, backend: Any) -> Any:
        from vsplit.config.woe import classing_params
        from vsplit.woe.fine import fit_fine_bins
        from vsplit.woe.label import LabelWoe
        from vsplit.woe.notebook import labels_of
        from vsplit.woe.partner import PartnerWoe

        w, d = self.config.woe, self.config.data
        table = self.table.iloc[rows][self.feature_columns].reset_index(drop=True)
        fine = fit_fine_bins(table, categorical=tuple(d.categorical or ()), max_bins=w.fine_bins,
                             min_bin_rows=w.min_bin_rows, party=self.name)
        codes = np.column_stack([f.codes(table[f.name]) for f in fine])
        if self.role == "label":
            assert d.label is not None
            labels = labels_of(self.table[d.label].iloc[rows].reset_index(drop=True), name=d.label, party=self.name,
                               positive_label=d.positive_label)
            return LabelWoe(fine, codes=codes, labels=labels, partners=self.partners, params=classing_params(
                self.config), scheme=w.scheme, key_bits=w.key_bits, name=self.name, backend=backend,
                insecure_small_key_for_tests=small_keys_allowed())
        return PartnerWoe(fine, codes=codes, label=self.hub, share_names=w.share_names, min_bin_rows=w.min_bin_rows,
                          schemes=("ou", "paillier"), min_key_bits=w.key_bits, backend=backend,
                          insecure_small_key_for_tests=small_keys_allowed())

    def finish(self, outcome: Any, comm: dict[str, Any], seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> dict[str, Any]:
        """Write this party's binning, selection and (label party) value report; the summary, also ``woe.json``."""
        started = time.perf_counter()
        w = self.config.woe
        selected = self.binning.select(min_iv=w.select_min_iv, top_k=w.select_top_k)
        save_checkpoint(self.folder / "woe.npz", {"maps": [m.state() for m in self.binning.maps],
                                                  "attributes": self.binning.attributes,
                                                  "iv": [self.binning.iv[a] for a in self.binning.attributes]},
                        run_id=self.config.output.run_id, party=self.name)
        self.write_json("selected.json", {"party": self.name, "select_min_iv": w.select_min_iv,
                                          "select_top_k": w.select_top_k, "attributes": selected})
        summary: dict[str, Any] = {"party": self.name, "role": self.role, "psi": psi_summary(outcome),
                                   "iv": self.binning.iv, "selected": selected, "communication": comm}
        if self.report is not None:
            from vsplit.woe.report import write_value_report

            write_value_report(self.folder, self.report)
            summary["tables"] = [{"party": t.party, "attribute": t.attribute, "iv": t.iv, "band": t.band,
                                  "bins": list(t.bins), "events": t.events.tolist(),
                                  "nonevents": t.nonevents.tolist()} for t in self.report.ranked()]
            summary["report"] = "value_report.md"
            if self.report.gini is not None:
                summary["gini"] = self.report.gini
        summary["seconds"] = {**{k: round(v, 3) for k, v in seconds.items()},
                              "write": round(time.perf_counter() - started, 3)}
        self.write_json("woe.json", summary)
        import shutil

        shutil.rmtree(self.folder / "psi-state" / "bin", ignore_errors=True)
        return summary
