"""The bank-only fallback: the label party's own model on its own columns, for customers no partner knows.

Theory of operation. A split model can score only the customers every partner knows. The label party therefore
trains, next to the split, its best own model on its own columns alone (in this process, with nothing sent to
anyone): the same network (the ``label_party_only`` baseline; same settings, same seeds), a regularized logistic
regression on the same prepared columns (:mod:`vsplit.models.logistic`) and, where LightGBM is installed, a booster
on them (:mod:`vsplit.models.booster`), fitted on the network's training rows. The one with the best AUC is chosen
(:attr:`BankOnly.chosen`; over folds the regression unless beaten by more than one standard error), and
the regression and the booster are then fitted again on all the rows: on a small table the network may barely train,
and a broken baseline would inflate the split's gain. The AUC is the mean over :data:`FOLDS` stratified folds of the
bank's rows (each model trained on the other folds, the network early-stopped on validation rows of those) when the
bank has at most :data:`CV_ROWS` rows, and the network's validation rows on a larger table: a tenth of 1,000 rows
holds a dozen positives, and on such rows the network won on validation rows and lost on the test rows on some seeds
of ``benchmarks/small_tables.py``. It is saved with its run as ``fallback.npz`` (arrays and text, no pickle) and is
the report's bank-alone baseline. At prediction time the customers PSI found unknown to a partner are scored by this
model, and each score says which model made it (:data:`SPLIT` or :data:`BANK_ONLY`). :func:`score_bank_only` is the
one call batch prediction, the notebook estimator and the online server make.

Example:
    >>> import numpy as np, pandas as pd
    >>> from vsplit.app.session import Schedule
    >>> from vsplit.party import LabelParty
    >>> rng = np.random.default_rng(0)
    >>> table = pd.DataFrame({"customer_id": [str(i) for i in range(64)], "a": rng.normal(size=64),
    ...                       "y": [0, 1] * 32})
    >>> model = train_bank_only(LabelParty("bank", table, label="y"), schedule=Schedule(epochs=1, batch_size=16),
    ...                         session=b"s" * 16)
    >>> score_bank_only(model, table.head(3)).shape
    (3,)
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from vsplit.app.local import run_sessions
from vsplit.app.session import Schedule, score_session, train_session
from vsplit.data.tables import all_ids
from vsplit.errors import CheckpointError
from vsplit.metrics import roc_auc
from vsplit.models.booster import NAME as BOOSTER
from vsplit.models.booster import BoosterModel
from vsplit.models.booster import available as booster_available
from vsplit.models.logistic import NAME as LOGISTIC
from vsplit.models.logistic import LogisticModel
from vsplit.models.recipe import ARCHITECTURE
from vsplit.models.seeds import derive_seed
from vsplit.party import LabelParty, trained_architecture
from vsplit.protocol.training.messages import ROLE_VALID
from vsplit.runtime.checkpoint import interpreting, load_checkpoint, save_checkpoint
from vsplit.topology.graph import Topology

#: the ``model`` column of predictions.csv: which model scored the row
SPLIT, BANK_ONLY = "split", "bank_only"
FILE = "fallback.npz"
#: the bank's own models: its network, a logistic regression and, where LightGBM is installed, a booster
#: (:attr:`BankOnly.chosen`)
NETWORK = "network"
BANK_MODELS = (NETWORK, LOGISTIC, BOOSTER)
#: on equal AUC the simpler model is chosen: the regression, then the booster, then the network
SIMPLER_FIRST = (LOGISTIC, BOOSTER, NETWORK)
#: a chosen bank model whose validation AUC is at most this far from 0.5 gets a warning (:func:`weak_warning`)
NEAR_CHANCE = 0.05
#: the bank's models are compared by cross-validation on at most this many rows (more: on validation rows)
CV_ROWS = 10_000
#: the folds of that cross-validation
FOLDS = 5
#: how the choice was made (:attr:`BankOnly.chosen_by`)
BY_VALIDATION = "validation rows"
BY_FOLDS = f"{FOLDS}-fold cross-validation, the regression unless beaten by more than one standard error"


@dataclass
class BankOnly:
    """The label party's own trained model: its party (preprocessing and modules) and its one-party topology."""

    party: LabelParty
    run: Topology
    history: list[dict[str, Any]]
    best_epoch: int | None
    #: the logistic regression on the same prepared columns (``None``: not fitted, e.g. a multiclass label)
    logistic: LogisticModel | None = None
    #: the booster on the same prepared columns (``None``: not fitted: no LightGBM, or turned off)
    booster: BoosterModel | None = None
    #: which model scores: :data:`NETWORK` or ``"logistic_regression"``
    chosen: str = NETWORK
    #: each candidate's AUC on the bank's validation rows, or its mean over the folds (:attr:`chosen_by`)
    val_auc: dict[str, float] = field(default_factory=dict)
    #: :data:`BY_VALIDATION` or :data:`BY_FOLDS`
    chosen_by: str = BY_VALIDATION

    def describe(self) -> dict[str, Any]:
        """What the report says of the bank's model: which one scores, each candidate's validation AUC (and how it
        was measured), and a warning when the chosen one is near chance."""
        out: dict[str, Any] = {"model": self.chosen, "val_auc": {k: round(v, 4) for k, v in self.val_auc.items()},
                               "chosen_by": self.chosen_by}
        if warning := weak_warning(self):
            out["warning"] = warning
        return out


def weak_warning(model: BankOnly) -> str | None:
    """A sentence for the report and the console when the chosen bank model's validation AUC is within
    :data:`NEAR_CHANCE` of 0.5 (a baseline that barely ranks, so the gain over it means little), else ``None``.

    >>> from types import SimpleNamespace
    >>> weak_warning(SimpleNamespace(chosen="network", val_auc={"network": 0.53}))[:48]
    'The bank-alone model (network) has a validation '
    """
    auc = model.val_auc.get(model.chosen)
    if auc is None or abs(auc - 0.5) > NEAR_CHANCE:
        return None
    return (f"The bank-alone model ({model.chosen}) has a validation AUC of {auc:.4f}, within {NEAR_CHANCE} of "
            "chance: the gain over the bank alone, and the scores of customers no partner knows, mean little; check "
            "the bank's columns and labels, or train on more rows")


def own_topology(party: LabelParty) -> Topology:
    """The one-party topology of the bank alone: its bottom and top, no partner."""
    return Topology.vertical(label_party=party.name, feature_parties=[], width=party.settings.embedding_width)


def train_bank_only(party: LabelParty, *, schedule: Schedule, session: bytes, booster: bool = True) -> BankOnly:
    """Train ``party`` (a freshly built label party) on its own columns alone; return the fitted model. ``booster``:
    also compare a booster (where LightGBM, the ``bench`` extra, is installed)."""
    run = own_topology(party)
    own = np.argsort(all_ids(party.ids), kind="stable")
    folds = party.task.name == "binary" and len(own) <= CV_ROWS and not party.streamed
    pristine = copy.deepcopy(party) if folds else None  # untrained: each fold trains a copy of it
    trained = run_sessions({party.name: train_session(party, run, schedule=schedule, rows=own)},
                           session=session)[party.name].result
    model = BankOnly(party=party, run=run, history=trained.history, best_epoch=trained.best_epoch)
    if party.task.name == "binary":
        boost = booster and booster_available()
        _choose(model, own, schedule, booster=boost)
        if pristine is not None:
            _choose_by_folds(model, pristine, own, schedule, session=session, booster=boost)
        if model.booster is not None:  # chosen or not, it learns from every row, as the regression (no epochs)
            y = party.labels.numpy().astype(np.int64)
            model.booster = BoosterModel.fit(_rows(party, own, schedule.seed), y[_sample(own, schedule.seed)],
                                             cardinalities=_cards(party), seed=_booster_seed(schedule))
    return model


def _cards(party: LabelParty) -> list[int]:
    return list(party.preprocessor.cardinalities) if party.preprocessor is not None else []


def _booster_seed(schedule: Schedule) -> int:
    return derive_seed(schedule.seed, "bank-only booster") % 2**31


def _simplest_within_one_se(aucs: Mapping[str, Sequence[float]]) -> str:
    """The one-standard-error rule over folds: the regression, the simplest model, unless the best mean AUC beats its
    mean by more than one standard error (the best model's folds' standard deviation over the square root of their
    count); then the best. Five folds of a few thousand rows differ by a point or more of AUC: the network or the
    booster must win by more than that to replace the regression.

    >>> _simplest_within_one_se({"network": [0.70, 0.74], "logistic_regression": [0.71, 0.71]})
    'logistic_regression'
    >>> _simplest_within_one_se({"network": [0.80, 0.80], "logistic_regression": [0.71, 0.71]})
    'network'
    """
    means = {m: float(np.mean(v)) for m, v in aucs.items()}
    best = _best(means)
    folds = np.asarray(aucs[best], dtype=np.float64)
    se = float(folds.std(ddof=1) / np.sqrt(len(folds))) if len(folds) > 1 else 0.0
    return LOGISTIC if LOGISTIC in means and means[LOGISTIC] >= means[best] - se else best


def _best(val_auc: Mapping[str, float]) -> str:
    """The model of the best AUC in ``val_auc``, the simpler one on a tie (:data:`SIMPLER_FIRST`)."""
    ranked = [m for m in SIMPLER_FIRST if m in val_auc]
    return max(ranked, key=lambda m: (val_auc[m], -ranked.index(m))) if ranked else LOGISTIC


def _choose_by_folds(model: BankOnly, pristine: LabelParty, own: np.ndarray, schedule: Schedule, *,
                     session: bytes, booster: bool = False) -> None:
    """Choose among the network, the regression and (``booster``) the booster by their AUC over :data:`FOLDS`
    stratified folds of ``own`` (each trained on the other folds, as on every row: same settings, same seeds): the
    simplest within one standard error of the best mean (:func:`_simplest_within_one_se`). Needs both labels in every
    fold; else the validation-rows choice stands."""
    from sklearn.model_selection import StratifiedKFold

    y = pristine.labels.numpy().astype(np.int64)
    if np.bincount(y[own], minlength=2).min() < FOLDS:
        return
    splitter = StratifiedKFold(FOLDS, shuffle=True, random_state=derive_seed(schedule.seed, "bank-only folds") % 2**32)
    aucs: dict[str, list[float]] = {NETWORK: [], LOGISTIC: [], **({BOOSTER: []} if booster else {})}
    cards = _cards(pristine)
    for k, (fit, held) in enumerate(splitter.split(own, y[own])):
        fit, held = own[fit], own[held]
        party = copy.deepcopy(pristine)
        run = own_topology(party)
        fold = (session + f":fold{k}".encode())[-16:]
        run_sessions({party.name: train_session(party, run, schedule=schedule, rows=fit)}, session=fold)
        scored = run_sessions({party.name: score_session(party, run, (party.ids, party.inputs), rows=held)},
                              session=fold)[party.name].result
        aucs[NETWORK].append(roc_auc(y[held], np.asarray(scored, dtype=np.float64)))
        logistic = LogisticModel.fit(_rows(party, fit, schedule.seed), y[fit], cardinalities=cards)
        aucs[LOGISTIC].append(roc_auc(y[held], logistic.proba(_rows(party, held, schedule.seed))))
        if booster:
            trees = BoosterModel.fit(_rows(party, fit, schedule.seed), y[fit], cardinalities=cards,
                                     seed=_booster_seed(schedule))
            aucs[BOOSTER].append(roc_auc(y[held], trees.proba(_rows(party, held, schedule.seed))))
    model.val_auc = {name: float(np.mean(values)) for name, values in aucs.items()}
    model.chosen = _simplest_within_one_se(aucs)
    model.chosen_by = BY_FOLDS


def _choose(model: BankOnly, own: np.ndarray, schedule: Schedule, *, booster: bool = False) -> None:
    """Fit the logistic regression (and, ``booster``, the booster) on the network's training rows and keep the best
    on its validation rows (the same rows :func:`~vsplit.app.session.make_plan` chose; none: the regression); then
    fit the regression again on all the rows (the network cannot be: its epoch was chosen on those validation rows;
    the booster is fitted again by :func:`train_bank_only`)."""
    party = model.party
    assert party.inputs is not None and party.preprocessor is not None
    roles = party.make_roles(own, validation_fraction=schedule.validation_fraction, seed=schedule.seed)
    fit, valid = own[roles != ROLE_VALID], own[roles == ROLE_VALID]
    y = party.labels.numpy().astype(np.int64)
    cards = party.preprocessor.cardinalities
    model.logistic = LogisticModel.fit(_rows(party, fit, schedule.seed), y[_sample(fit, schedule.seed)],
                                       cardinalities=cards)
    if booster:
        model.booster = BoosterModel.fit(_rows(party, fit, schedule.seed), y[_sample(fit, schedule.seed)],
                                         cardinalities=cards, seed=_booster_seed(schedule))
    chosen = next((h for h in model.history if h.get("epoch") == model.best_epoch), None)
    if len(valid) and len(np.unique(y[valid])) == 2:
        truth, rows = y[_sample(valid, schedule.seed)], _rows(party, valid, schedule.seed)
        model.val_auc[LOGISTIC] = roc_auc(truth, model.logistic.proba(rows))
        if model.booster is not None:
            model.val_auc[BOOSTER] = roc_auc(truth, model.booster.proba(rows))
        if chosen is not None and chosen.get("val_auc") is not None:
            model.val_auc[NETWORK] = float(chosen["val_auc"])
    model.chosen = _best(model.val_auc)
    if len(valid):  # chosen, the regression learns from every row of the bank's (its fit takes a second, no epochs)
        model.logistic = LogisticModel.fit(_rows(party, own, schedule.seed), y[_sample(own, schedule.seed)],
                                           cardinalities=cards)


#: the logistic regression fits (and is validated) on at most this many rows, a seeded sample of a larger table
LOGISTIC_ROWS = 200_000


def _sample(rows: np.ndarray, seed: int) -> np.ndarray:
    """``rows``, or a seeded sample of :data:`LOGISTIC_ROWS` of them (in their order)."""
    if len(rows) <= LOGISTIC_ROWS:
        return rows
    rng = np.random.default_rng(derive_seed(seed, "bank-only logistic"))
    return rows[np.sort(rng.choice(len(rows), LOGISTIC_ROWS, replace=False))]


def _rows(party: LabelParty, rows: np.ndarray, seed: int) -> tuple[torch.Tensor, ...]:
    """The prepared inputs of ``party``'s ``rows`` (:func:`_sample`) as tensors, read in one go from a party that
    streams its table from Parquet."""
    picked = _sample(rows, seed)
    inputs = party.rows_of(picked)
    everything = torch.arange(len(picked))
    return tuple(t if isinstance(t, torch.Tensor) else t[everything] for t in inputs)


def score_bank_only(model: BankOnly, table: pd.DataFrame, *, rows: np.ndarray | None = None,
                    session: bytes = b"vsplit-bank-only") -> np.ndarray:
    """The bank-only model's scores of ``table``'s rows (``rows``: positions in ``table``, default all), in order."""
    ids, inputs = model.party.prepare(table)
    rows = np.arange(len(ids), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    if len(rows) == 0:
        return np.zeros(0, dtype=np.float64)
    if model.chosen == LOGISTIC and model.logistic is not None:
        assert inputs is not None
        index = torch.from_numpy(rows)
        return model.logistic.proba(tuple(t[index] for t in inputs))
    if model.chosen == BOOSTER and model.booster is not None:
        assert inputs is not None
        index = torch.from_numpy(rows)
        return model.booster.proba(tuple(t[index] for t in inputs))
    scored = run_sessions({model.party.name: score_session(model.party, model.run, (ids, inputs), rows=rows)},
                          session=(session * 16)[:16])
    return np.asarray(scored[model.party.name].result, dtype=np.float64)


def save_bank_only(model: BankOnly, path: Path, *, run_id: str) -> Path:
    """Write the bank-only model (its modules and preprocessing) to ``path`` (atomically)."""
    party = model.party
    state: dict[str, Any] = {
        "party": party.name, "kind": BANK_ONLY,
        "segments": {s: m.state_dict() for s, m in party.modules_for(model.run, task_width=party.task_width).items()},
        "feature_columns": party.feature_columns, "numeric_embedding": party.numeric_kind,
        "settings": {k: getattr(party.settings, k) for k in ARCHITECTURE},
        "chosen": model.chosen, "val_auc": dict(model.val_auc), "chosen_by": model.chosen_by,
    }
    if model.logistic is not None:
        state["logistic"] = model.logistic.state()
    if model.booster is not None:
        state["booster"] = model.booster.state()
    if party.preprocessor is not None:
        state["preprocessor"] = party.preprocessor.state()
    save_checkpoint(path, state, run_id=run_id, party=party.name)
    return path


def load_bank_only(path: Path, build: Callable[[dict[str, Any]], LabelParty], *, run_id: str,
                   party: str) -> BankOnly | None:
    """The bank-only model saved at ``path``, in the label party ``build(architecture it was trained with)`` returns
    (freshly built from the training table; :func:`~vsplit.party.trained_architecture`), or ``None`` if the run saved
    none (a run without the fallback, or a label party with no columns of its own)."""
    from vsplit.data.preprocess import TablePreprocessor

    if not path.is_file():
        return None
    state = load_checkpoint(path, run_id=run_id, party=party)
    if state.get("kind") != BANK_ONLY:
        raise CheckpointError(f"{path} is not a bank-only fallback model; delete it or train the run again")
    with interpreting(path):
        alone = build(trained_architecture(state))
        if "preprocessor" in state:
            alone.preprocessor = TablePreprocessor.from_state(state["preprocessor"])
        run = own_topology(alone)
        for seg, module in alone.modules_for(run, task_width=alone.task_width).items():
            module.load_state_dict(state["segments"][seg])
        chosen = str(state.get("chosen", NETWORK))
        if chosen not in BANK_MODELS or (chosen == LOGISTIC and "logistic" not in state) or (
                chosen == BOOSTER and "booster" not in state):
            raise CheckpointError(f"{path}: unknown bank model {chosen!r}; train the run again")
        try:
            logistic = LogisticModel.from_state(state["logistic"]) if "logistic" in state else None
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{path}: its logistic regression is damaged ({exc}); train the run again") from exc
        booster = None
        if "booster" in state:
            if chosen == BOOSTER and not booster_available():
                raise CheckpointError(f"{path}: the bank's chosen model is a booster, which needs LightGBM: pip "
                                      "install 'vsplit[bench]'")
            try:
                booster = BoosterModel.from_state(state["booster"])
            except (KeyError, ValueError) as exc:
                raise CheckpointError(f"{path}: its booster is damaged ({exc}); train the run again") from exc
    return BankOnly(party=alone, run=run, history=[], best_epoch=None, logistic=logistic, booster=booster,
                    chosen=chosen,
                    val_auc={str(k): float(v) for k, v in dict(state.get("val_auc", {})).items()},
                    chosen_by=str(state.get("chosen_by", BY_VALIDATION)))


@dataclass
class TestCoverage:
    """The bank-only model on a test table: its scores of every row, and metrics of who scored whom."""

    proba: np.ndarray  # the bank-only model's score of every test row, in table order
    coverage: dict[str, Any]  # "all" (split where shared, bank-only elsewhere), "shared" (split), "bank_only"
    bank_model: dict[str, Any] = field(default_factory=dict)  # BankOnly.describe(): which model, why, any warning


def cover_test(model: BankOnly, table: pd.DataFrame, rows: np.ndarray, split_proba: np.ndarray) -> TestCoverage:
    """Score every row of the test ``table`` with the bank-only model and report metrics for every customer (the
    split's score on the shared ``rows``, the bank-only score elsewhere), for the shared ones and for the others."""
    party = model.party
    y = party.task.encode_with(table[party.label], party.label_info).numpy()
    alone = score_bank_only(model, table)
    rows = np.asarray(rows, dtype=np.int64)
    others = np.setdiff1d(np.arange(len(table)), rows)
    merged = alone.copy()
    merged[rows] = split_proba

    def metrics(pick: np.ndarray, proba: np.ndarray) -> dict[str, Any]:
        return {**party.task.metrics(y[pick], proba), "n_scored": len(pick)}

    coverage: dict[str, Any] = {"all": metrics(np.arange(len(table)), merged), "shared": metrics(rows, split_proba)}
    if len(others):
        coverage["bank_only"] = metrics(others, alone[others])
    return TestCoverage(proba=alone, coverage=coverage, bank_model=model.describe())


def score_unknown(model: BankOnly | None, table: pd.DataFrame, *, id_column: str,
                  scored: Mapping[str, float]) -> dict[str, float]:
    """The bank-only scores of the customers of ``table`` that the split did not score (those not in ``scored``, a
    partner does not know them), by ID; empty without a fallback model. Serving calls this for such a customer."""
    if model is None:
        return {}
    ids = [str(v) for v in table[id_column]]
    left = np.asarray([i for i, v in enumerate(ids) if v not in scored], dtype=np.int64)
    proba = score_bank_only(model, table, rows=left)
    return {ids[r]: float(p) for r, p in zip(left.tolist(), proba.tolist(), strict=True)}


def explain_bank_only(model: BankOnly, table: pd.DataFrame, *, rows: np.ndarray | None = None, steps: int = 32,
                      method: str = "auto") -> Any:
    """The bank-only model's explanation of ``table``'s rows (``rows``: positions, default all, in that order): an
    :class:`~vsplit.explain.explanation.Explanation` over the bank's own columns (no partner group), whose reason
    codes are those of the applicants this model scores. The logistic regression's attributions are each column's
    coefficient times its distance from the training rows' mean, in log-odds (exact: they sum to the score minus
    the reference's); the network's are integrated gradients, as for the split (``steps``, ``method``)."""
    from vsplit.explain.explanation import Explanation
    from vsplit.explain.paths import by_column
    from vsplit.explain.session import explain_session, explanation_of, input_columns

    party = model.party
    ids, inputs = party.prepare(table)
    assert inputs is not None
    rows = np.arange(len(ids), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
    names = [str(v) for v in ids[rows]]
    if model.chosen == LOGISTIC and model.logistic is not None:
        picked = tuple(t[torch.from_numpy(rows)] for t in inputs)
        columns, values = by_column(model.logistic.contributions(picked), input_columns(party))
        score = model.logistic.log_odds(picked)
        return Explanation(label_party=party.name, ids=names, score=score,
                           baseline_score=np.full(len(rows), model.logistic.reference_log_odds),
                           features=pd.DataFrame(values, columns=columns, index=names),
                           groups=pd.DataFrame(index=names), method="exact",
                           note="the bank's logistic regression: coefficient times (value - mean)")
    if model.chosen == BOOSTER and model.booster is not None:
        picked = tuple(t[torch.from_numpy(rows)] for t in inputs)
        shares, base = model.booster.attributions(picked)  # one TreeSHAP pass: the shares and where they start
        columns, values = by_column(shares, input_columns(party))
        return Explanation(label_party=party.name, ids=names, score=shares.sum(axis=1) + base, baseline_score=base,
                           features=pd.DataFrame(values, columns=columns, index=names),
                           groups=pd.DataFrame(index=names), method="exact",
                           note="the bank's booster: TreeSHAP contributions (LightGBM's pred_contrib)")
    session = explain_session(party, model.run, (ids, inputs), rows=rows, steps=steps, method=method)
    outcome = run_sessions({party.name: session}, session=b"vsplit-bank-only")[party.name]
    return explanation_of(party.name, names, outcome.result)
