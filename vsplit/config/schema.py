"""The party config: one TOML file per organization, as a typed tree with defaults.

A minimal label-party config::

    [party]
    name = "bank"
    role = "label"

    [data]
    path = "bank.parquet"
    label = "y"

    [network]
    listen = "127.0.0.1:7700"
    key = "keys/bank.key"
    cert = "keys/bank.pem"
    peers = { partner = "keys/partner.pem" }

Everything else has a default: ``[topology] kind = "vertical"``. In a U-shaped split the label party (the client)
dials and the ``compute`` party (the server) listens: the hub, the party every other party reaches, listens.
Paths are relative to the config file's folder.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vsplit.models.recipe import RECIPE


@dataclass(frozen=True)
class PartySection:
    name: str
    #: "label" (holds the labels: the coordinator), "feature" (holds feature columns), "compute" (no data: runs
    #: segments only, the U-shaped server)
    role: str


@dataclass(frozen=True)
class TopologySection:
    #: "vertical" (partners' bottoms feed the label party's top), "vanilla" (a feature client runs the layers before
    #: the cut, the label party the rest), "u_shaped" (the label party keeps head, tail and labels; a compute
    #: party runs the middle)
    kind: str = "vertical"
    #: vertical: every party with feature columns besides the label party, in a fixed order every party lists the
    #: same way (default: the label party's peers; a partner's default is itself alone)
    feature_parties: tuple[str, ...] | None = None
    #: "binary", "multiclass" or "regression"
    task: str = "binary"
    #: multiclass: the number of classes (default: counted from the label column)
    n_classes: int | None = None
    #: u_shaped: width of the middle segment's output (default: model.embedding_width)
    middle_width: int | None = None
    #: horizontal: the clients (same columns, their own rows), in a fixed order every party lists the same way
    clients: tuple[str, ...] = ()
    #: horizontal: the server's party name
    server: str = ""
    #: horizontal: the clients' segments, "vanilla" (labels sent to the server) or "u_shaped" (labels and last
    #: layers stay with each client)
    segments: str = "vanilla"


@dataclass(frozen=True)
class ScheduleSection:
    """How many clients with the same columns train together (``topology.kind = "horizontal"``; docs/clients.md).

    A round is one pass of every client over its rows; ``train.epochs`` rounds, ``train.batch_size`` and
    ``train.seed`` apply."""

    #: "sequential", "splitfed_v1", "splitfed_v2" or "fedavg"
    kind: str = "splitfed_v1"
    #: sequential: "fixed", "random" or "random_no_repeat"
    order: str = "fixed"
    #: sequential: hand-offs relayed (and sealed end to end) by the "server", or "direct" between clients
    route: str = "server"
    #: sequential: hand "full" state (weights, buffers, optimizer state) or "weights" only
    handoff: str = "full"
    #: splitfed_v2: the server takes batches "client_major" or "batch_interleaved"
    interleave: str = "batch_interleaved"
    #: at each average: "keep", "reset" (a fresh optimizer each round) or "average" the optimizer state
    optimizer_policy: str = "keep"
    #: at each average: "average" the float buffers (BatchNorm statistics) or keep them "local"
    buffer_policy: str = "average"
    #: the party that averages client-side weights (empty: the server)
    federated_server: str = ""
    #: "auto" (on for SplitFed and FedAvg with 3 or more clients), "on" or "off"
    secure_aggregation: str = "auto"
    #: every optimizer's learning rate per round: "constant", "step" (times lr_factor from lr_step_at of the rounds
    #: on) or "cosine" (down to lr_factor at the last round)
    lr_schedule: str = "constant"
    lr_step_at: float = 0.9
    lr_factor: float = 0.1


@dataclass(frozen=True)
class DataSection:
    #: this party's table (a compute party has none)
    path: str = ""
    id_column: str = "customer_id"
    features: tuple[str, ...] | None = None
    categorical: tuple[str, ...] | None = None
    label: str | None = None
    positive_label: str | int | bool | None = None
    #: "error": missing values (and infinities) in a feature column stop the run, naming the column and row;
    #: "impute": numbers get the training median plus a was-missing column, categories a "<missing>" category
    missing: str = "error"
    scaling: str = "quantile"
    #: a column of mostly numbers with a few text values (a typo) is refused, naming the values and rows; true
    #: makes those values missing (then `missing` applies), with a warning
    coerce_numbers: bool = False
    #: a held-out table (same columns) the pilot scores after training
    test_path: str | None = None
    #: never read data.path (a Parquet file) whole: fit the preprocessing by a pass over it, stream its IDs to PSI,
    #: read the label as one column and the aligned rows per batch (docs/psi.md, "Training from Parquet")
    stream: bool = False


@dataclass(frozen=True)
class ModelSection:
    #: "network" (split neural networks), "boosting" (vertical gradient-boosted trees, ``[boosting]``),
    #: "scorecard" (a vertical scorecard on WOE inputs, ``[woe]`` and ``[scorecard]``) or "ensemble" (networks and
    #: trees combined by the label party, ``[ensemble]`` and ``[boosting]``)
    kind: str = "network"
    embedding_width: int = 16
    #: the defaults are the default recipe's (vsplit.models.recipe: RECIPE; PLAIN is the network before it)
    bottom_hidden: tuple[int, ...] = RECIPE["bottom_hidden"]
    top_hidden: tuple[int, ...] = RECIPE["top_hidden"]
    merge: str = "concat"
    #: None: the default recipe's (0.1), but 0 in a horizontal run, whose runs as processes do not yet draw the
    #: same dropout masks as in one process
    dropout: float | None = None
    #: numeric columns in the default bottom: "auto" (default: piecewise-linear, none in a horizontal run or with
    #: data.stream), "piecewise" (bins fitted on this party's own rows, never sent), "periodic" or "none"
    #: (docs/models.md)
    numeric_embedding: str = RECIPE["numeric_embedding"]
    #: numbers per numeric column after the embedding, and (piecewise) bins per column
    numeric_width: int = 8
    numeric_bins: int = 16
    #: label party: heads of the top model's ensemble; they share the one cut exchange (docs/models.md)
    members: int = 1
    #: embedding widths of the partners (label party only); default: this party's embedding_width for each
    peer_widths: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainSection:
    #: epochs, the optimizer and early stopping default to the default recipe's (vsplit.models.recipe)
    epochs: int = RECIPE["epochs"]
    #: left out: 256, or smaller on a small table (train.min_steps); a number is used as given
    batch_size: int | None = None
    optimizer: str = RECIPE["optimizer"]
    lr: float = RECIPE["lr"]
    weight_decay: float = RECIPE["weight_decay"]
    #: the learning rate over the epochs, each party its own optimizer's: "constant" or "cosine" (down along half a
    #: cosine over `epochs`; vsplit.models.schedule). Not for a horizontal run ([horizontal] lr_schedule is per round)
    lr_schedule: str = RECIPE["lr_schedule"]
    #: each party's moving average of its own parameters, its decay per step (0: none): validation scores, and the
    #: run keeps, the averaged weights (vsplit.models.averaging). Left out: the default recipe's (0.995), but 0 in a
    #: horizontal run, which refuses any other value
    ema: float | None = None
    #: what the parties agree on (batch order, validation rows) is drawn from it; see init_seed for the rest
    seed: int = 0
    #: this party's initial weights, dropout and defence noise: "secret" (a seed only this party holds, made on first
    #: use as <party>.init-seed next to network.key, mode 0600; vsplit.models.secret) or "seed" (from train.seed: a
    #: peer who knows it can invert the first batch, warned). Left out: "seed" if train.seed is set, else "secret"
    init_seed: str = "auto"
    validation_fraction: float = 0.1
    #: with batch_size left out, the batch of 256 is halved (not below 32) until an epoch has at least this many
    #: optimizer steps on the training rows, and early stopping waits at least 10 times as many steps (0: neither;
    #: vsplit.app.session.fitted_batch)
    min_steps: int = RECIPE["min_steps"]
    patience: int | None = RECIPE["patience"]
    #: early stopping, at the label party: "val_loss" (the lowest validation loss), the task's metric ("val_auc"
    #: for a binary task, "val_accuracy" multiclass, "val_rmse" regression) or "auto" (default: val_auc for a
    #: binary task, val_loss otherwise); the chosen epoch's weights are kept
    monitor: str = RECIPE["monitor"]
    #: label party: after matching, each class must occur at least this often among the shared customers (with one
    #: of each left for validation); a regression needs this many rows. Fewer stops the run before training
    min_class_rows: int = 10
    #: torch threads of this party's process; 1 avoids two parties on one machine fighting over cores
    threads: int = 1
    #: training steps a partner may send before the first one's gradients return (1: exact; docs/wan.md); the
    #: label party's value is the run's
    pipeline_window: int = 1
    #: batches per exchange, each a local step on cached gradients (1: exact; docs/wan.md); the label party decides
    local_steps: int = 1
    #: refuse activations received from a peer with any value larger than this in magnitude, as a non-finite one is
    #: (the run stops naming the peer). The default only refuses values so large that the receiving layer's sums may
    #: overflow float32 (issue 29: a partner sending 3e38); activations of a sane model stay far below e.g. 1e4
    max_abs_activation: float = 1e30
    #: the same bound on the gradients this party receives
    max_abs_gradient: float = 1e30
    #: train a bag of this many split networks one after another, network i seeded seed + 1000 * i, and score with
    #: the mean of their probabilities (vsplit.bagging.SplitBag in the pilot form; docs/models.md). Every party sets
    #: the same value; N networks cost N times the training time and the cut traffic
    networks: int = 1


@dataclass(frozen=True)
class PsiSection:
    case_fold: bool = False
    duplicates: str = "error"
    reveal: str = "both"
    #: buckets of bucketed PSI (docs/psi.md); both parties must set the same number (1: unbucketed)
    buckets: int = 1
    #: this party's own budget: spill its hashed IDs to disk by bucket above this many MiB (0: keep them in memory)
    memory_budget_mb: int = 0
    #: where this party's curve arithmetic runs: "process" (this process, or `workers` local processes) or "ray"
    #: (Ray actors that keep each bucket's scalar; pip install 'vsplit[ray]')
    backend: str = "process"
    #: process: worker processes (0 or 1: this process); ray: actors (0: one per CPU of the cluster)
    workers: int = 1
    #: ray: the cluster to join (e.g. "auto" or "ray://head:10001"); empty starts a local Ray on this machine
    ray_address: str = ""
    #: keep this party's PSI progress under its run folder (psi-state/), so that rerunning after a party died resumes
    #: from the buckets both sides finished (docs/psi.md, "Resuming"); removed when the run succeeds
    resumable: bool = True


@dataclass(frozen=True)
class PrivacySection:
    #: defenses this party runs, as `vsplit privacy defenses` lists them (e.g. "clip_noise" at the label party,
    #: "nopeek" or "embedding_noise" at a feature party); several are joined with "+" or listed
    defenses: tuple[str, ...] = ()
    #: detectors of a hijacking server this client runs on the gradients it receives, as `vsplit privacy detectors`
    #: lists them (e.g. "gradient_scrutinizer", "splitout:patience=5"): only the client of a vanilla or U-shaped
    #: split, which knows the labels; on detection it stops before its next activations leave
    detectors: tuple[str, ...] = ()
    #: vanilla client with detectors: the column of its table with the labels it handed the server (not an input)
    detector_labels: str | None = None
    #: with "splitguard": the column (true/false) flagging the canary rows whose labels were faked (not an input)
    canary_column: str | None = None


@dataclass(frozen=True)
class NetworkSection:
    key: str
    cert: str
    peers: dict[str, str]
    listen: str | None = None
    dial: str | None = None
    #: horizontal: HOST:PORT of each further peer this party dials (a separate federated server; with
    #: schedule.route = "direct", every client listed before this one in topology.clients)
    addresses: dict[str, str] = field(default_factory=dict)
    #: horizontal client, sequential relayed by the server: every other client's certificate, to check the hand-off
    #: keys the server relays were signed by that client (vsplit.horizontal.keysig)
    client_certs: dict[str, str] = field(default_factory=dict)
    connect_timeout_s: float = 120.0
    read_timeout_s: float = 300.0
    max_frame_mb: int = 64
    #: when the connection to a peer drops mid-run (reset, EOF without goodbye, silence), redial (dialing side) or
    #: keep listening (hub) for this long, re-authenticate with the same pinned certificates and resume where the
    #: peer stopped receiving; past it the run stops (restart with --resume). 0 switches reconnects off. Keep it
    #: below read_timeout_s, and the same on both sides
    reconnect_timeout_s: float = 60.0
    #: how this party encodes the tensors it sends across a cut: "none" (float32, exact), "float16", "bfloat16",
    #: "int8" (one scale per row), "topk_<fraction>" (gradients only, e.g. "topk_0.1"); it receives any of them
    compression: str = "none"
    #: carry what a lossy compression lost on a training tensor into the next tensor of the same stream
    error_feedback: bool = False
    #: the hub: only connections from these addresses or networks (e.g. ["203.0.113.7", "10.1.2.0/24"]) reach the TLS
    #: handshake, and they have handshake slots strangers cannot take; empty: any address may try (pinning decides)
    allow_from: tuple[str, ...] = ()
    #: the hub: close a connection that sent no whole TLS record within this many seconds (separate from the
    #: handshake's own timeout), so idle strangers hold no handshake slot
    first_record_timeout_s: float = 1.5


@dataclass(frozen=True)
class OutputSection:
    dir: str = "runs"
    run_id: str = "vsplit-run"
    #: label party: also train the label-party-only baseline for the report
    baselines: bool = True
    #: log.txt is rotated past this size (two older files are kept: log.txt.1, log.txt.2)
    log_max_mb: float = 10.0


@dataclass(frozen=True)
class ServeSection:
    """``vsplit serve``: online scoring (docs/serving.md). The bank answers HTTP, each partner runs a daemon."""

    #: "live": the bank asks each partner per (micro-batched) request; "cached": partners send a signed snapshot of
    #: every customer's embedding, then deltas, and the bank scores with no request-time traffic
    mode: str = "live"
    #: bank: the HTTP address of the scoring API
    http: str = "127.0.0.1:8000"
    #: bank: where partner daemons connect over mutual TLS (default: network.listen); partner: where it dials
    #: (default: network.dial)
    address: str | None = None
    #: partner: the feature table it serves, Parquet or CSV, reloaded when it changes (default: data.path)
    table: str | None = None
    reload_s: float = 1.0
    #: bank: a partner that has not answered within this many milliseconds is down (HTTP 503 naming it)
    timeout_ms: float = 2000.0
    #: bank: "error" (503 naming the partner) or "fallback" (the bank-only model's answer, flagged) when one is down
    on_partner_down: str = "error"
    #: bank: requests scored together at most, requests waiting at most (more: HTTP 503), batches in flight at once
    max_batch: int = 256
    max_queue: int = 4096
    workers: int = 2
    #: bank: HTTP bodies above this many KiB are refused (413)
    max_body_kb: int = 512
    #: bank, live mode: hide each asked ID among k-1 decoys from the training intersection, the same ones each time
    #: (1: no padding; docs/serving.md says what a partner still learns)
    k_anonymity: int = 1
    #: bank: a file holding the bearer token the bank's own apps must send (Authorization: Bearer ...)
    token_file: str | None = None
    #: bank: HTTPS for the API (certificate and key), and the CA whose client certificates it requires
    http_cert: str | None = None
    http_key: str | None = None
    http_client_ca: str | None = None
    #: bank: seconds to drain in-flight requests on shutdown
    drain_s: float = 10.0
    #: partner: the runs (model versions) its daemon serves; a bank asking for another is refused (default:
    #: output.run_id only)
    runs: tuple[str, ...] = ()
    #: bank, cached mode: MiB of one partner's snapshot parts held until the snapshot completes, and seconds an
    #: incomplete snapshot is kept (it is also dropped when its link closes)
    max_snapshot_mb: int = 2048
    snapshot_timeout_s: float = 300.0
    #: bank, cached mode: a delta (or a full snapshot) removing more than this share of a partner's held customers
    #: is refused
    max_delta_removed: float = 0.2
    #: bank, the HTTP front (docs/serving.md, "Limits"): a request head (request line and headers) above this many
    #: KiB or with more header lines than ``max_headers`` is answered 431; a head not received within
    #: ``header_timeout_s`` or a body within ``body_timeout_s`` closes the connection; above ``max_connections``
    #: open connections the oldest with no request in flight is closed to make room
    max_header_kb: int = 16
    max_headers: int = 100
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 512
    #: bank: ``POST /v1/models`` (load and switch a model version) answers only when true, and only to the bearer
    #: token of ``manage_token_file`` (a file of its own, not ``token_file``)
    manage: bool = False
    manage_token_file: str | None = None
    #: bank: ``GET /healthz`` answers without the bearer token (for a load balancer); everything else needs it
    public_health: bool = False


@dataclass(frozen=True)
class ConsoleSection:
    """The party's read-only console in its browser (docs/console.md): ``vsplit train``, ``pilot`` and ``serve``."""

    #: serve the console while the party runs (or pass --console)
    enabled: bool = False
    #: where it listens: 127.0.0.1 (this machine only) unless set; any other address needs ``token_file``
    host: str = "127.0.0.1"
    #: its port (0: any free port, printed when it starts)
    port: int = 0
    #: a file holding the token a browser must show once (``/?token=...``), readable by its owner only
    token_file: str | None = None


@dataclass(frozen=True)
class ExplainSection:
    """``vsplit explain``, its reason codes and the model card (docs/governance.md)."""

    #: label party (every party follows it): "exact" integrates each row's path exactly between its breakpoints
    #: (piecewise-linear segments only), "quadrature" with ``steps`` nodes, "auto": exact where the label party's
    #: segments allow it (a partner whose segments do not refuses, naming the fix)
    method: str = "auto"
    #: quadrature nodes of integrated gradients' path (label party; every party follows it)
    steps: int = 32
    #: rows explained per exchange (label party)
    chunk: int = 256
    #: a party with columns: how many of its most influential column names per row it tells the label party
    #: (0: none, only its group's attribution)
    share_top_k: int = 0
    #: label party: reasons per declined row, and which scores decline ("high": at or above threshold; "low")
    reasons: int = 4
    decline_when: str = "high"
    threshold: float = 0.5
    #: label party: plain-words text of a reason, per own column or partner name
    texts: dict[str, str] = field(default_factory=dict)
    #: label party: the model card's fairness slices (AUC and approval rate) by this test-table column
    fairness_column: str | None = None


@dataclass(frozen=True)
class TuneSection:
    """``vsplit tune``: a search between organizations (docs/tuning.md); ``vsplit train`` ignores it."""

    #: label party: the trials the study holds (trials of a resumed study count)
    n_trials: int = 20
    #: label party: the study's Optuna journal file, resumed when it exists (default: <run folder>/tune/study.log)
    study: str = ""
    #: label party: the share of its training rows each trial is scored on and never trained on
    validation_fraction: float = 0.2
    #: label party: the sampler's seed
    seed: int = 0
    #: label party: the knobs it searches, knob = [low, high] (numeric_embedding: the choices); empty: the default
    space: dict[str, tuple[float | str, ...]] = field(default_factory=dict)
    #: partner: the values it accepts, knob = [low, high] or the choices; every knob, bounded here or not, stays
    #: within vsplit's hard limits (vsplit.tune.space.LIMITS, docs/tuning.md#bounding-a-search)
    bounds: dict[str, tuple[float | str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class BoostingSection:
    """``[model] kind = "boosting"``: vertical gradient-boosted trees across the cut (docs/boosting.md)."""

    trees: int = 100
    max_depth: int = 5
    learning_rate: float = 0.3
    reg_lambda: float = 1.0
    gamma: float = 0.0
    min_child_weight: float = 1.0
    #: value bins per column, fitted by each party on its own aligned rows (a missing value has a code of its own)
    max_bins: int = 32
    #: partner: refuse to sum a node of fewer rows (a node of one row tells that row's gradient)
    min_node_rows: int = 1
    #: label party: the homomorphic scheme, "ou" (default) or "paillier"
    scheme: str = "ou"
    #: label party: the size of the key it makes per session; partner: the smallest key it accepts
    key_bits: int = 2048
    #: label party: stop after this many trees without a better log loss on its held-out rows
    #: (``train.validation_fraction`` of the aligned rows), keeping the best trees; 0: train every tree
    early_stopping_rounds: int = 0
    #: label party: gradient-based one-side sampling (SecureBoost+): per tree the rows of the largest ``goss_top_rate``
    #: share of |gradient| and ``goss_other_rate`` of all rows drawn among the rest (reweighted); 0 and 0: every row.
    #: Fewer rows to encrypt and sum; a partner then learns which rows were drawn (docs/boosting.md)
    goss_top_rate: float = 0.0
    goss_other_rate: float = 0.0
    #: label party: order each categorical column's codes (every party's) by its smoothed label rate at the first
    #: tree's root, so one threshold splits the categories by rate; a partner then learns that order of its own
    #: categories, and the label party which partner columns are categorical (docs/boosting.md)
    order_categories: bool = False
    #: label party, with order_categories: a category of fewer rows keeps its place instead (its rank would tell its
    #: few customers' labels)
    min_category_rows: int = 30


@dataclass(frozen=True)
class WoeSection:
    """``vsplit bin``: WOE binning and information value across the cut, the value report (docs/credit_scoring.md)."""

    #: fine (quantile) bins per numeric attribute, fitted by each party on its own aligned rows
    fine_bins: int = 20
    #: every party: no fine bin of fewer rows (a partner: the fewest rows any per-bin count the label party sees covers)
    min_bin_rows: int = 1
    #: partner: the label party's report names its attributes (false: "<party>#<k>", their positions only)
    share_names: bool = False
    #: label party: the coarse classing: no coarse bin under this share of the rows, the event-rate trend
    #: ("auto", "ascending", "descending", "none") and the most value bins per attribute
    min_bin_share: float = 0.05
    monotonic: str = "auto"
    max_coarse_bins: int = 10
    #: label party: the homomorphic scheme ("ou" or "paillier") and key size; partner: the smallest key it accepts
    scheme: str = "ou"
    key_bits: int = 2048
    #: every party: the attributes a later training takes (selected.json): IV at least select_min_iv, then the
    #: select_top_k best (0: every one)
    select_min_iv: float = 0.0
    select_top_k: int = 0
    #: processes for the encryption (label party) and the sums (partner); 1: this process
    workers: int = 1
    #: every party (the same on all): the value report also gives the Gini of a bank-only scorecard against a joint
    #: one ([scorecard] settings, the label party's) on validation_share of the aligned rows, held out by the label
    #: party (drawn with train.seed), with a paired bootstrap interval; off: it trains a scorecard across the cut
    report_gini: bool = False
    validation_share: float = 0.3


@dataclass(frozen=True)
class ScorecardSection:
    """``[model] kind = "scorecard"``: a vertical scorecard on the WOE of the attributes ``[woe]`` selects
    (docs/credit_scoring.md, "Scorecard")."""

    #: label party: full-batch steps, step size and L2 penalty of the logistic regression (partners take the label
    #: party's)
    iterations: int = 50
    learning_rate: float = 2.0
    l2: float = 0.0
    #: label party: the points scale (every party's points use it): base_score points at base_odds non-events per
    #: event, pdo points to double the odds
    base_score: float = 600.0
    base_odds: float = 50.0
    pdo: float = 20.0
    #: partner: what the label party's model card and reason codes show beyond its number of attributes
    share_names: bool = False
    share_points: bool = False
    #: label party: reason codes per row in ``vsplit predict`` (0: none)
    reasons: int = 3
    #: label party: the homomorphic scheme ("ou" or "paillier") and key size; partner: the smallest key it accepts
    scheme: str = "ou"
    key_bits: int = 2048


@dataclass(frozen=True)
class EnsembleSection:
    """``[model] kind = "ensemble"``: split networks and vertical boosted trees (or the vertical scorecard), combined
    by the label party on the log-odds scale (docs/ensemble.md); the networks take the usual ``[model]``/``[train]``
    keys, the trees ``[boosting]``, the scorecard ``[woe]`` and ``[scorecard]``."""

    #: every party (the same on all): networks of the bag, each its own seed (as ``train.networks`` does)
    networks: int = 1
    #: label party: the share of its training rows set aside (stratified, drawn with train.seed) to choose the weight
    weight_fraction: float = 0.1
    #: label party: the networks' candidate weights, the trees getting 1 - w (empty: 0, 0.05, ..., 1)
    weights: tuple[float, ...] = ()
    #: label party: how the weight is chosen on the set-aside rows: "best" (the best AUC) or "one_se" (the weight
    #: nearest 0.5 within one standard error of the best; vsplit.weight_rules)
    weight_rule: str = "best"
    #: every party (the same on all): a fixed weight of the networks in [0, 1] instead; no rows set aside
    weight: float | None = None
    #: every party (the same on all): once the weight is chosen, train both parts again on every row
    refit: bool = True
    #: every party (the same on all): the networks' partner, "trees" (``[boosting]``) or "scorecard" (``[woe]`` and
    #: ``[scorecard]``: with ``weight = 0.5``, the estimator's small-table blend between organizations)
    second: str = "trees"


@dataclass(frozen=True)
class PartyConfig:
    party: PartySection
    network: NetworkSection
    data: DataSection = field(default_factory=DataSection)
    topology: TopologySection = field(default_factory=TopologySection)
    model: ModelSection = field(default_factory=ModelSection)
    train: TrainSection = field(default_factory=TrainSection)
    psi: PsiSection = field(default_factory=PsiSection)
    privacy: PrivacySection = field(default_factory=PrivacySection)
    schedule: ScheduleSection = field(default_factory=ScheduleSection)
    output: OutputSection = field(default_factory=OutputSection)
    serve: ServeSection = field(default_factory=ServeSection)
    console: ConsoleSection = field(default_factory=ConsoleSection)
    explain: ExplainSection = field(default_factory=ExplainSection)
    tune: TuneSection = field(default_factory=TuneSection)
    boosting: BoostingSection = field(default_factory=BoostingSection)
    woe: WoeSection = field(default_factory=WoeSection)
    scorecard: ScorecardSection = field(default_factory=ScorecardSection)
    ensemble: EnsembleSection = field(default_factory=EnsembleSection)
    #: the file the config came from (for resolving relative paths and error messages)
    source: str = ""
