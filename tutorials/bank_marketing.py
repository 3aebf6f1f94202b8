"""The bank-marketing tutorial, runnable: it computes every figure that tutorials/bank_marketing.md talks about.

    python tutorials/bank_marketing.py                       # about two minutes on two cores
    python tutorials/bank_marketing.py --no-pilot            # skip the two-process pilot (step 8)
    python tutorials/bank_marketing.py --save-figure docs/img/bank_marketing_tutorial.png

A bank and a marketing partner want to predict who subscribes a term deposit (UCI Bank Marketing) without sharing
customer records. The script walks through the data, keys, PSI, split training, the two baselines, what crossed the
wire, joint prediction, the two-process pilot and SecretFlow's tutorial setting. It prints the figures as it goes and
writes them to OUT/figures.json, with the plot OUT/bank_marketing.png (OUT: --out, default tutorials/output/).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from cryptography.hazmat.primitives.serialization import Encoding
from sklearn.metrics import roc_auc_score, roc_curve

from vsplit.datasets import preset
from vsplit.errors import AuthenticationError
from vsplit.estimator import SplitClassifier
from vsplit.evaluation import shared_test_views
from vsplit.models.secret import read_or_create
from vsplit.runtime.psi import align_in_process
from vsplit.transport.identity import create_identity, load_certificate
from vsplit.transport.pinning import identify_peer
from vsplit.woe import information_value

#: Quoted, not computed: the test AUC that SecretFlow's own split-learning tutorial printed on this split.
SECRETFLOW_QUOTED = {
    "auc": 0.845,
    "source": "SecretFlow bank-marketing SL tutorial",
    "url": "https://secretflow.readthedocs.io/en/stable/tutorial/Split_Learning_for_bank_marketing.html",
    "note": "printed by sl_model.evaluate (auc_1: 0.8452) after 10 epochs with Gaussian embedding DP "
    "(noise_multiplier 0.5) and label DP (eps 64); quoted, not re-run here",
}
LABELS = {"split": "split (bank + partner)", "label_party_only": "bank alone",
          "centralized": "pooled data (centralized)", "split_with_duration": "split, with the leaky duration"}


def section(title: str) -> None:
    print(f"\n== {title} ==", flush=True)


def vsplit_cli(*args: str) -> str:
    """Run one `vsplit` command with this interpreter and return what it printed."""
    # our own interpreter and module with arguments built here: no shell, no untrusted input
    done = subprocess.run([sys.executable, "-m", "vsplit.cli.main", *args],  # noqa: S603
                          check=True, capture_output=True, text=True)
    return done.stdout


# -- 1. the data ---------------------------------------------------------------------------------------------------
def describe_data(data: Any, leaky: Any) -> dict[str, Any]:
    """Who holds what. Only this tutorial, holding both tables, can count the overlap; the parties cannot."""
    out: dict[str, Any] = {"columns": {p: [c for c in t.columns if c != data.id_column] for p, t in data.train.items()}}
    for split in ("train", "test"):
        tables = getattr(data, split)
        bank = set(tables["bank"][data.id_column])
        partner = set(tables["partner"][data.id_column])
        out[split] = {"bank_rows": len(bank), "partner_rows": len(partner), "shared": len(bank & partner),
                      "partner_only": len(partner - bank),
                      "positive_rate": float((tables["bank"][data.label] == data.positive_label).mean())}
    # `duration` (length of the last call) is known only after the call, when the answer is known too.
    pooled = leaky.pooled("train")  # the benchmark preset, which keeps duration
    out["duration_auc"] = float(roc_auc_score(pooled[data.label] == data.positive_label, pooled.duration))
    return out


# -- 2. keys and certificates --------------------------------------------------------------------------------------
def make_keys(parties: Path) -> dict[str, Any]:
    """Each organization creates its key pair; they swap certificates and check fingerprints by phone."""
    printed = {}
    for party in ("bank", "partner"):
        text = vsplit_cli("keys", "new", "--party", party, "--out", str(parties / party / "keys"), "--force")
        print(text.rstrip())
        printed[party] = text.split("SHA-256 fingerprint:")[1].split()[0]
    # The partner e-mails partner.pem; the bank checks it against the fingerprint read out on the phone and pins it.
    received = parties / "bank" / "keys" / "peers" / "partner.pem"
    received.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(parties / "partner" / "keys" / "partner.pem", received)
    shown = vsplit_cli("keys", "show", str(received))
    print(shown.rstrip())
    matches = printed["partner"] in shown
    (parties / "partner" / "keys" / "peers").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(parties / "bank" / "keys" / "bank.pem", parties / "partner" / "keys" / "peers" / "bank.pem")
    # The TLS handshake checks the peer's certificate with identify_peer: only the pinned one is accepted.
    pins = {"partner": load_certificate(received)}
    accepted = identify_peer(pins["partner"].public_bytes(Encoding.DER), pins=pins, claimed="partner", who="peer")
    impostor = create_identity("partner").certificate  # also says "partner", but is not the partner's key
    try:
        identify_peer(impostor.public_bytes(Encoding.DER), pins=pins, claimed="partner", who="peer")
        refusal = None
    except AuthenticationError as exc:
        refusal = str(exc)
    print(f"pinned certificate accepted: {accepted == printed['partner']}")
    print(f"impostor refused: {refusal}")
    # Each organization also draws its init seed beside its key (what `vsplit keys init-seed` does): its initial
    # weights come from it, so no peer can rebuild them (docs/privacy.md). Only because this script plays both
    # organizations can it hand the notebook run below the same seeds, so the notebook and the pilot train one model.
    seeds = {party: read_or_create(parties / party / "keys" / f"{party}.init-seed") for party in ("bank", "partner")}
    return {"fingerprints": printed, "fingerprint_checked": matches, "pinned_accepted": accepted == printed["partner"],
            "impostor_refused": refusal, "init_seeds": seeds}


# -- 3. private set intersection -----------------------------------------------------------------------------------
def run_psi(data: Any, expected: int) -> dict[str, Any]:
    """PSI on the test customers, as each party would run it: in, its own ID list; out, its rows of the shared ones."""
    ids = {party: list(table[data.id_column]) for party, table in data.test.items()}
    aligned = align_in_process(ids, label_party="bank")
    bank, partner = aligned["bank"], aligned["partner"]
    assert bank.ids == partner.ids  # row i of each party is the same customer
    out = {"bank_size": bank.stats.size, "partner_size": partner.stats.size, "intersection": bank.stats.intersection,
           "expected": expected, "bank_learns_partner_size": bank.stats.peer_sizes["partner"],
           "partner_learns_bank_size": partner.stats.peer_sizes["bank"],
           "bytes_sent": {"bank": bank.stats.bytes_sent, "partner": partner.stats.bytes_sent},
           "seconds": round(bank.stats.seconds, 2)}
    print(f"bank: {out['bank_size']} IDs, partner: {out['partner_size']} IDs -> {out['intersection']} shared "
          f"(expected {expected}: {'equal' if out['intersection'] == expected else 'DIFFERENT'})")
    print(f"each learns the other's set size ({out['bank_learns_partner_size']}, {out['partner_learns_bank_size']}) "
          "and which of its own rows are shared; nothing about the others")
    print(f"bytes sent: bank {out['bytes_sent']['bank']:,}, partner {out['bytes_sent']['partner']:,} "
          f"({out['seconds']} s)")
    return out


def partner_value(data: Any) -> dict[str, Any]:
    """Before training: WOE and IV of every attribute, the labels encrypted at the bank (docs/credit_scoring.md)."""
    value = information_value(data.train, label=data.label, positive_label=data.positive_label,
                              categorical=data.categorical, share_names={"partner": True})
    ranking = value.report.summary()  # party, attribute, bins, IV, band; highest IV first
    print(ranking.head(8).to_string(index=False))
    return {"ranking": ranking.to_dict(orient="records"), "selected": value.binnings["partner"].select(min_iv=0.02)}


# -- 4.-5. training and the two baselines --------------------------------------------------------------------------
def train_and_compare(data: Any, *, epochs: int | None, seed: int,
                      init_seeds: dict[str, int]) -> tuple[SplitClassifier, dict[str, Any]]:
    settings = {} if epochs is None else {"epochs": epochs}
    clf = SplitClassifier(label_party="bank", label=data.label, id_column=data.id_column,
                          positive_label=data.positive_label, random_state=seed, init_seeds=init_seeds, **settings)
    clf.fit(data.train)  # PSI on the training customers, then split training with early stopping
    test = shared_test_views(data.test, label_party="bank", id_column=data.id_column)
    bank_alone = clf.clone(mode="label_party_only").fit(data.train)
    pooled = clf.clone(mode="centralized", alignment="join").fit(data.train)  # pooled data: a plain join
    models = {"split": clf, "label_party_only": bank_alone, "centralized": pooled}
    y = (test["bank"][data.label] == data.positive_label).to_numpy()
    results = {}
    for mode, model in models.items():
        metrics = model.evaluate(test)
        fpr, tpr, _ = roc_curve(y, model.predict_proba(test)[:, 1])
        results[mode] = {**metrics, "epochs": len(model.history_), "seconds": round(model.fit_seconds_, 1),
                         "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()}}
    return clf, results


def train_with_duration(*, epochs: int | None, seed: int) -> dict[str, Any]:
    """The benchmark setting: the same split, with the call length that leaks the label."""
    data = preset("bank_marketing", seed=seed)
    settings = {} if epochs is None else {"epochs": epochs}
    clf = SplitClassifier(label_party="bank", label=data.label, id_column=data.id_column,
                          positive_label=data.positive_label, random_state=seed, **settings).fit(data.train)
    test = shared_test_views(data.test, label_party="bank", id_column=data.id_column)
    fpr, tpr, _ = roc_curve(test["bank"][data.label] == data.positive_label, clf.predict_proba(test)[:, 1])
    return {**clf.evaluate(test), "epochs": len(clf.history_), "seconds": round(clf.fit_seconds_, 1),
            "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()}}


# -- 6. what crossed the wire --------------------------------------------------------------------------------------
def communication(clf: SplitClassifier) -> dict[str, Any]:
    """Bytes and frames each party's pump sent during training (encoded frames, as on the network)."""
    stats = {party: pump.stats for party, pump in clf.pumps_.items()}
    sent = {party: s.as_dict()["sent"] for party, s in stats.items()}
    embeddings = sent["partner"]["Activations"]["bytes"]
    per_row = embeddings / (len(clf.history_) * clf.n_aligned_)
    out = {"training_sent": sent, "training_total": {p: s.total("sent") for p, s in stats.items()},
           "psi_bytes": clf.psi_stats_["bytes_sent"], "psi_intersection": clf.psi_stats_["intersection"],
           "embedding_bytes_per_customer_epoch": round(per_row, 1), "embedding_width": clf.embedding_width}
    for party, kinds in sent.items():
        listed = ", ".join(f"{kind} {v['bytes']:,} B in {v['frames']} frames" for kind, v in kinds.items())
        print(f"{party} sent: {listed}")
    print(f"PSI before training: bank sent {out['psi_bytes']['bank']:,} B, partner {out['psi_bytes']['partner']:,} B")
    print(f"per customer and epoch the partner sends {per_row:.1f} B: {clf.embedding_width} float32 numbers "
          f"({clf.embedding_width * 4} B) plus framing; its columns never leave it")
    return out


# -- 7. joint prediction -------------------------------------------------------------------------------------------
def predict(clf: SplitClassifier, data: Any) -> dict[str, Any]:
    """Score all of the bank's test customers; those the partner does not know cannot be scored."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        proba = clf.predict_proba(data.test)  # (bank rows, 2), in the bank's row order
    unscored = int(np.isnan(proba[:, 1]).sum())
    message = next((str(w.message) for w in caught if "not scored" in str(w.message)), None)
    print(f"scored {len(proba) - unscored} of {len(proba)} bank customers; warning: {message}")
    print("first five P(subscribe):", np.round(proba[:5, 1], 3).tolist())
    return {"rows": len(proba), "scored": len(proba) - unscored, "unscored": unscored, "warning": message}


# -- 8. the two-process pilot --------------------------------------------------------------------------------------
def pilot(parties: Path, runs: Path, *, epochs: int | None) -> dict[str, Any]:
    """The same job as two OS processes over mutual TLS on localhost, with the keys made in step 2."""
    from vsplit.pilot.orchestrate import run_pilot

    shutil.rmtree(runs / "tutorial", ignore_errors=True)
    overrides = [f"output.dir={json.dumps(str(runs.resolve()))}"]
    if epochs is not None:
        overrides.append(f"train.epochs={epochs}")
    result = run_pilot("bank-marketing-no-duration", root=parties, run_id="tutorial",
                       overrides=tuple(overrides), quiet=True)
    report = result.report
    sent = {party: sum(v["bytes"] for v in c["sent"].values()) for party, c in report["communication"].items()}
    out = {"auc": report["metrics"]["auc"], "baselines": {k: v["auc"] for k, v in report["baselines"].items()},
           "psi_train_intersection": report["psi"]["train"]["intersection"], "bytes_sent": sent,
           "report": str(result.run_dir / "bank" / "report.md"), "seconds": round(result.seconds, 1)}
    print(f"two processes over mutual TLS: test AUC {out['auc']:.4f}, PSI found {out['psi_train_intersection']} "
          f"shared training customers, bytes sent (PSI, training, scoring): {sent}")
    print(f"report: {out['report']} ({out['seconds']} s)")
    return out


# -- 9. SecretFlow's tutorial setting ------------------------------------------------------------------------------
def secretflow_setting(*, seed: int) -> dict[str, Any]:
    """SecretFlow's split of the 4,521-row sample: bank = age, job, marital, education; their 80/20 split (1234).
    A small sample: it always trains with the estimator's own epochs and early stopping (``--epochs`` is for the
    bank-marketing models)."""
    data = preset("secretflow_bank", seed=seed)
    clf = SplitClassifier(label_party="bank", label=data.label, id_column=data.id_column,
                          positive_label=data.positive_label, random_state=seed).fit(data.train)
    test = shared_test_views(data.test, label_party="bank", id_column=data.id_column)
    bank_alone = clf.clone(mode="label_party_only").fit(data.train)
    out = {"split": clf.evaluate(test), "label_party_only": bank_alone.evaluate(test), "quoted": SECRETFLOW_QUOTED}
    print(f"our split AUC {out['split']['auc']:.4f}, bank alone {out['label_party_only']['auc']:.4f} "
          f"on their {out['split']['n_scored']} test customers")
    print(f"{SECRETFLOW_QUOTED['source']} printed AUC {SECRETFLOW_QUOTED['auc']} (quoted, not re-run: "
          f"{SECRETFLOW_QUOTED['url']})")
    return out


# -- the plot ------------------------------------------------------------------------------------------------------
def explain_and_card(clf: SplitClassifier, data: Any, out: Path, *, rows: int = 1000) -> dict[str, Any]:
    """Explain the first ``rows`` shared test customers, print a declined one's reasons, and write the model card."""
    from vsplit.explain.card import model_card
    from vsplit.explain.reasons import reason_codes
    from vsplit.report.card import write_model_card

    test = shared_test_views(data.test, label_party="bank", id_column="customer_id")
    keep = set(test["bank"]["customer_id"].head(rows))
    some = {n: v[v["customer_id"].isin(keep)] for n, v in test.items()}
    explanation = clf.explain(some)
    importance = explanation.global_importance()
    print("mean |attribution| (log-odds):", {k: round(float(v), 3) for k, v in importance.head(5).items()})
    texts = {"partner": "call history held by the partner", "housing": "has a housing loan"}
    reasons = reason_codes(explanation, n=3, texts=texts, decline_when="low", threshold=0.5)
    first = reasons.iloc[0]
    print(f"customer {first['id']} (P = {first['probability']:.3f}): " +
          "; ".join(first[f"text_{i}"] for i in (1, 2, 3) if first[f"text_{i}"]))
    card = model_card(clf, data.train, test, explanation=explanation, fairness_column="age", draws=100,
                      decline_when="low", title="bank_marketing_no_duration, bank + partner")
    markdown, html = write_model_card(out / "model_card", card)
    print(f"model card: {markdown} and {html}")
    return {"rows": len(explanation.ids), "top": list(importance.index[:3]),
            "completeness_max_error": float(explanation.completeness_error().max()),
            "declined": len(reasons), "card": [markdown.name, html.name], "auc_interval": card["metrics"][
                "auc_interval"], "ece": card["metrics"]["ece"]}


def plot(figures: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = figures["metrics"]
    fig, (roc_ax, bar_ax) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 1.25]})
    styles = {"split": ("C0", "-"), "centralized": ("k", ":"), "split_with_duration": ("C2", "-"),
              "label_party_only": ("C3", "-")}
    for mode, (color, line) in styles.items():
        m = metrics[mode]
        roc_ax.plot(m["roc"]["fpr"], m["roc"]["tpr"], color=color, linestyle=line, lw=1.6,
                    label=f"{LABELS[mode]} (AUC {m['auc']:.3f})")
    roc_ax.plot([0, 1], [0, 1], color="0.7", lw=0.8)
    roc_ax.set(xlabel="false positive rate", ylabel="true positive rate",
               title=f"ROC, {metrics['split']['n_scored']:,} test customers both know")
    roc_ax.legend(loc="lower right", fontsize=8)

    sf = figures["secretflow_bank"]
    bars = [(f"bank_full: {LABELS[m]}", metrics[m]["auc"], styles[m][0], "")
            for m in ("label_party_only", "split", "centralized", "split_with_duration")]
    bars += [("bank sample, SecretFlow split: bank alone", sf["label_party_only"]["auc"], "C3", ""),
             ("bank sample, SecretFlow split: vsplit split", sf["split"]["auc"], "C0", ""),
             ("bank sample: SecretFlow tutorial (quoted)", sf["quoted"]["auc"], "0.75", "//")]
    names, values, colors, hatches = zip(*bars, strict=True)
    y = np.arange(len(bars))[::-1]
    bar_ax.barh(y, values, color=colors, hatch=hatches, edgecolor="white")
    for yi, v in zip(y, values, strict=True):
        bar_ax.text(v + 0.005, yi, f"{v:.3f}", va="center", fontsize=8)
    bar_ax.set_yticks(y, names, fontsize=8)
    bar_ax.set(xlim=(0.5, 1.0), xlabel="test AUC", title="Test AUC (hatched: quoted, not computed here)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "output",
                        help="folder for figures.json, the plot, keys and the pilot's run (default: tutorials/output)")
    parser.add_argument("--seed", type=int, default=0, help="the seed every random choice derives from")
    parser.add_argument("--epochs", type=int, default=None,
                        help="maximum epochs of the bank-marketing models (default: the estimator's, 40); "
                        "SecretFlow's small setting (step 9) always uses the estimator's")
    parser.add_argument("--no-pilot", action="store_true", help="skip the two-process pilot (step 8)")
    parser.add_argument("--save-figure", type=Path, default=None, help="also write the plot to this path")
    args = parser.parse_args(argv)
    # The models are small: one thread is fastest, and it is what each pilot process uses (train.threads = 1), so
    # the in-process run and the pilot compute exactly the same numbers.
    torch.set_num_threads(1)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    figures: dict[str, Any] = {"seed": args.seed, "epochs": args.epochs}

    section("1. The data: who holds what")
    data = preset("bank_marketing_no_duration", seed=args.seed)
    figures["data"] = facts = describe_data(data, preset("bank_marketing", seed=args.seed))
    for party, columns in facts["columns"].items():
        print(f"{party}: {', '.join(columns)}")
    for split in ("train", "test"):
        f = facts[split]
        print(f"{split}: bank {f['bank_rows']} customers, partner {f['partner_rows']} people: {f['shared']} shared "
              f"({f['shared'] / f['bank_rows']:.1%} of the bank's), {f['partner_only']} the bank does not know; "
              f"{f['positive_rate']:.1%} subscribed")
    print(f"`duration` (left out here) alone ranks subscribers with AUC {facts['duration_auc']:.3f}: it leaks the "
          "label")

    section("2. Keys and certificates")
    parties = args.out / "parties"
    figures["keys"] = make_keys(parties)

    section("3. Private set intersection (test customers)")
    figures["psi"] = {"test": run_psi(data, expected=facts["test"]["shared"])}
    figures["partner_value"] = partner_value(data)  # IV of the partner's attributes before training

    section("4-5. Split training, the bank alone, and the pooled data")
    seeds = figures["keys"].pop("init_seeds")  # secrets: not written to figures.json
    clf, figures["metrics"] = train_and_compare(data, epochs=args.epochs, seed=args.seed, init_seeds=seeds)
    figures["psi"]["train"] = {**clf.psi_stats_, "expected": facts["train"]["shared"]}
    figures["training"] = {"epochs_run": len(clf.history_), "best_epoch": clf.best_epoch_,
                           "history": clf.history_, "n_aligned": clf.n_aligned_}
    print(f"PSI in fit(): {clf.psi_stats_['intersection']} shared training customers "
          f"(expected {facts['train']['shared']}); {len(clf.history_)} epochs, best {clf.best_epoch_ + 1}")
    figures["metrics"]["split_with_duration"] = train_with_duration(epochs=args.epochs, seed=args.seed)
    print(f"{'model':<28}{'AUC':>8}{'KS':>8}{'F1':>8}{'log loss':>10}{'epochs':>8}")
    for mode, m in figures["metrics"].items():
        print(f"{LABELS[mode]:<28}{m['auc']:>8.4f}{m['ks']:>8.4f}{m['f1']:>8.4f}{m['log_loss']:>10.4f}"
              f"{m['epochs']:>8}")

    section("6. What crossed the wire")
    figures["communication"] = communication(clf)

    section("7. Joint prediction")
    figures["prediction"] = predict(clf, data)

    section("8. The two-process pilot")
    figures["pilot"] = None if args.no_pilot else pilot(parties, args.out / "runs", epochs=args.epochs)
    if args.no_pilot:
        print("skipped (--no-pilot)")

    section("9. SecretFlow's tutorial setting")
    figures["secretflow_bank"] = secretflow_setting(seed=args.seed)

    section("10. Why a customer got their score, and the model card")
    figures["governance"] = explain_and_card(clf, data, args.out)

    figures["seconds"] = round(time.perf_counter() - started, 1)
    plot(figures, args.out / "bank_marketing.png")
    if args.save_figure is not None:
        args.save_figure.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(args.out / "bank_marketing.png", args.save_figure)
    for m in figures["metrics"].values():
        m.pop("roc")  # plotted, not kept: thousands of points
    (args.out / "figures.json").write_text(json.dumps(figures, indent=1, default=float) + "\n")
    print(f"\nwrote {args.out / 'figures.json'} and {args.out / 'bank_marketing.png'} ({figures['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
