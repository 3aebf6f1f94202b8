"""One organization's process, for every topology: its config, its channels, the session it drives, its outputs.

Theory of operation. Each organization runs ``vsplit train --config party.toml`` (and later ``vsplit predict``);
both build a :class:`PartyNode`, which picks the program of the config's topology: :class:`~vsplit.node.aligned.
AlignedNode` where every party trains on the same aligned rows in every step (vertical, vanilla, U-shaped: PSI,
training, scoring) and :class:`~vsplit.node.horizontal.HorizontalNode` where clients with the same columns take turns
or rounds (sequential, SplitFed, FedAvg: a join, then the schedule's stages). What they share lives here, written once:
the party's run folder, its links to the peers (:mod:`vsplit.node.links`), one pump over mutual TLS driving the
program's session (the same generator the in-process runner drives, so same seeds give the same model in one
process and over TLS), closing every channel on the way out, and the outputs: ``result.json`` and, per scoring job,
``predictions.csv`` and ``predict.json`` (:mod:`vsplit.node.outputs`).

A program supplies :meth:`PartyNode.session` (its training run as ``(stage, machine)`` pairs), :meth:`finish` (its
result and model), and for prediction :meth:`load_model` and :meth:`score_table`.

Example:
    >>> session_id("pilot-1").hex()[:12]
    '65e9b8515fe4'
"""

from __future__ import annotations

import functools
import hashlib
import logging
import sys
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from vsplit.atomic import confine
from vsplit.config import PartyConfig, resolve
from vsplit.config.names import run_folder
from vsplit.errors import CheckpointError, ConfigError, VsplitError
from vsplit.node.links import open_links, plan_links
from vsplit.node.outputs import Scores, write_json, write_predictions
from vsplit.runtime.checkpoint import interpreting, load_checkpoint, newest_readable, save_checkpoint
from vsplit.runtime.drive import drive
from vsplit.runtime.jobs import PredictJob
from vsplit.runtime.pump import Pump
from vsplit.transport.channel import Channel


def session_id(run_id: str) -> bytes:
    """The 16-byte session id every party derives from the shared run id: frames of another run are refused."""
    return hashlib.sha256(f"vsplit-session:{run_id}".encode()).digest()[:16]


class PartyNode:
    """Runs one party of a split, as configured by ``config``: ``PartyNode(config)`` is the node of its topology."""

    #: a listener hands over the channels of peers that were lost and come back (horizontal rounds)
    readmits = False
    #: what :meth:`finish` does, said on the console as it starts (with progress on)
    finishing = "saving its model, scoring the baselines and writing its report"
    #: the party's console state (:class:`vsplit.console.state.ConsoleState`) when a console watches this run
    console: Any = None
    #: topology kind -> the program that runs it (each program names its kinds when it subclasses this one)
    programs: ClassVar[dict[str, type[PartyNode]]] = {}

    def __init_subclass__(cls, *, kinds: tuple[str, ...] = (), **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for kind in kinds:
            PartyNode.programs[kind] = cls

    def __new__(cls, config: PartyConfig, *args: Any, **kwargs: Any) -> PartyNode:
        if cls is PartyNode:  # the program of the config's topology (vsplit.node imports every program)
            kind = config.topology.kind if config.model.kind == "network" else config.model.kind  # e.g. "boosting"
            if kind not in PartyNode.programs:
                raise ConfigError(f"topology.kind: no party program runs {kind!r}; choose one of "
                                  f"{', '.join(sorted(PartyNode.programs))}")
            cls = PartyNode.programs[kind]
        return super().__new__(cls)

    def __init__(self, config: PartyConfig, *, resume: bool = False, progress: bool = True) -> None:
        import torch

        self.config = config
        self.name = config.party.name
        self.role = config.party.role
        self.resume = resume
        self.progress = progress
        self.folder = run_folder(resolve(config, config.output.dir), config.output.run_id, self.name)
        confine(self.folder)  # no write under the run folder follows a link planted in it (vsplit.atomic)
        self.standing: Any = None  # a listener kept open for peers that reconnect (resumable channels)
        torch.set_num_threads(max(1, config.train.threads))

    # -- what a program supplies -------------------------------------------------------------------------------------
    def session(self) -> Any:
        """This party's training run as a generator of ``(stage, machine)`` pairs (:mod:`vsplit.app.session`)."""
        raise NotImplementedError

    def finish(self, outcome: Any, comm: dict[str, Any], seconds: Mapping[str, float], *,
               lost: Iterable[str] = ()) -> Any:
        """Save this party's model and write its result from the session's ``outcome`` (``comm``: the traffic,
        ``seconds``: per stage, ``lost``: peers dropped on the way); the result."""
        raise NotImplementedError

    def load_model(self) -> None:
        """Load this party's own saved model parts (and preprocessing) from ``model.npz``."""
        raise NotImplementedError

    def score_table(self, table: Any, *, channels: Mapping[str, Channel] | None, peers: list[str] | None,
                    psi_state: Path | None = None, source: Path | None = None) -> Scores:
        """Score ``table``'s customers (``None``: a party without rows; ``source``: its file, named in data errors)
        with the saved model, with the peers; ``psi_state``: the job's folder for resumable PSI progress."""
        raise NotImplementedError

    def before_connect(self) -> None:
        """Checks that must fail before any peer is reached (e.g. an unreadable checkpoint with ``--resume``)."""

    def pump_options(self) -> dict[str, Any]:
        """Extra :class:`~vsplit.runtime.pump.Pump` options of this program's training run."""
        return {}

    @property
    def patient(self) -> bool:
        """A dialer waits while its peer still holds this party's earlier session (a restarted client)."""
        return False

    @property
    def feature_columns(self) -> list[str] | None:
        """The columns this party's model reads from an input table (``None``: a party without rows)."""
        return None

    # -- channels ----------------------------------------------------------------------------------------------------
    def open_channels(self, peers: list[str] | None = None) -> dict[str, Channel]:
        """Mutual-TLS channels to the peers (``peers``: only those), as :func:`~vsplit.node.links.plan_links`
        plans them: dial first, then listen."""
        channels, self.standing = open_links(self.config, plan_links(self.config, peers), readmit=self.readmits,
                                             patient=self.patient)
        return channels

    def pump(self, channels: Mapping[str, Channel], *, purpose: str = "", **options: Any) -> Pump:
        """A pump over ``channels`` in this run's session (``purpose``: a separate session, e.g. ``":predict"``)."""
        return Pump(self.name, dict(channels), session=session_id(self.config.output.run_id + purpose),
                    timeout=self.config.network.read_timeout_s, **options)

    # -- the run -----------------------------------------------------------------------------------------------------
    def run(self, channels: Mapping[str, Channel] | None = None) -> Any:
        """The whole training run over mutual TLS (or the ``channels`` given); returns what this party learned."""
        started = time.perf_counter()
        try:
            self.before_connect()
        except VsplitError as exc:
            if channels is None:  # the peers are told at once rather than left waiting (vsplit.node.early)
                from vsplit.node.early import tell_peers

                tell_peers(self.config, exc, session=session_id(self.config.output.run_id))
            raise
        channels = dict(channels) if channels is not None else self.open_channels()
        seconds = {"connect": time.perf_counter() - started}
        pump = self.pump(channels, **self.pump_options())
        if self.console is not None:  # it reads the channels and the pump when asked; nothing more per step
            self.console.watch_run(channels=pump.channels, pump=pump)
        outcome = self.drive(self.session(), channels, pump, seconds, progress=self.progress)
        if self.progress:  # a label party then trains its own model and writes the report: seconds without a bar
            print(f"{self.name}: {self.finishing} ...", file=sys.stderr, flush=True)
        return self.finish(outcome, pump.stats.as_dict(), seconds, lost=pump.lost)

    def exchange(self, session: Any, *, channels: Mapping[str, Channel] | None = None,
                 peers: list[str] | None = None) -> tuple[Any, dict[str, Any]]:
        """Run a scoring ``session`` (or one machine) with the peers, in the run's prediction session (channels
        opened unless given); its outcome and the traffic."""
        channels = dict(channels) if channels is not None else self.open_channels(peers)
        pump = self.pump(channels, purpose=":predict")
        outcome = self.drive(session if isinstance(session, Generator) else iter_one(session), channels, pump)
        return outcome, pump.stats.as_dict()

    @staticmethod
    def drive(session: Any, channels: Mapping[str, Channel], pump: Pump,
              seconds: dict[str, float] | None = None, *, progress: bool = False) -> Any:
        """Drive ``session`` over ``pump`` (the peers told a code on a failure), then close every channel;
        ``progress``: a bar of the bytes sent in each alignment (training has its own bar)."""
        try:
            return drive(session, pump, seconds, run=functools.partial(_run_stage, progress=progress))
        finally:
            for channel in {id(c): c for c in (*channels.values(), *pump.channels.values())}.values():
                channel.close()  # those handed over since (a client that came back) too

    # -- prediction --------------------------------------------------------------------------------------------------
    def predict(self, table_path: Path | None, *, ids_path: Path | None = None,
                channels: Mapping[str, Channel] | None = None, job: PredictJob | None = None,
                peers: list[str] | None = None) -> Path:
        """Score customers with the saved model parts; a party that scores writes ``predictions.csv``.

        The party scores the IDs in ``ids_path`` (default: every row of its ``table_path``) with its own columns from
        ``table_path``; a party that only contributes (a partner, a server) scores nothing itself. IDs a party does
        not know are listed with a status, never silently dropped. Everything goes to the folder of ``job``
        (default: a new job, :mod:`vsplit.runtime.jobs`); ``peers``: the peers to serve (default: all).
        """
        job = job if job is not None else PredictJob.open(self.folder)
        began = time.perf_counter()
        try:
            self.load_model()
            table, requested = self.read_input(table_path, ids_path)
        except VsplitError as exc:
            if channels is None:  # the peers are told at once rather than left waiting (vsplit.node.early)
                self.tell_peers_before_scoring(exc)
            raise
        scores = self.score_table(table, channels=channels, peers=peers, psi_state=job.psi_state, source=table_path)
        summary: dict[str, Any] = {"run_id": self.config.output.run_id, "party": self.name, "job": job.id,
                                   "resumed": job.resumed, **scores.summary,
                                   "seconds": {**scores.seconds, "total": round(time.perf_counter() - began, 4)},
                                   "communication": scores.communication}
        path = job.folder / "predict.json"
        if scores.by_id is not None:
            path, summary["counts"], summary["models"] = write_predictions(
                job.folder, id_column=self.config.data.id_column, own=scores.ids, wanted=requested,
                by_id=scores.by_id, fallback=scores.fallback, missing=scores.missing, me=self.name, within=self.folder,
                unseen=scores.unseen)
        elif scores.unseen:  # a party that scores nothing itself flags its own columns in its own job folder
            summary["unseen_categories"] = self._write_unseen(job.folder, scores.unseen)
        job.finish()
        write_json(job.folder / "predict.json", summary, within=self.folder)  # written last: the job is done
        return path

    def _write_unseen(self, folder: Path, unseen: Mapping[str, Sequence[str]]) -> dict[str, Any]:
        """``unseen.csv`` in ``folder``: each scored customer of this party (a partner) whose columns hold a category
        its training never saw, with those columns (``;``-separated), and a warning in its log; what
        ``predict.json`` records of it. The label party is not told: each party flags its own columns."""
        from collections import Counter

        import pandas as pd

        from vsplit.atomic import write_atomic
        from vsplit.data.unseen import unseen_message

        frame = pd.DataFrame({self.config.data.id_column: list(unseen),
                              "unseen_categories": [";".join(c) for c in unseen.values()]})
        write_atomic(folder / "unseen.csv", frame.to_csv(index=False).encode(), within=self.folder)
        counts = Counter(c for columns in unseen.values() for c in columns)
        logging.getLogger(__name__).warning("%s; the customers are in unseen.csv",
                                            unseen_message(self.name, counts, rows=len(unseen)))
        return {"rows": len(unseen), "columns": dict(counts), "file": "unseen.csv"}

    def tell_peers_before_scoring(self, error: BaseException) -> list[str]:
        """Tell the peers, in the prediction session, that this party stops before scoring because of ``error`` (an
        abort code only; :func:`vsplit.node.early.tell_peers`): the peers told."""
        from vsplit.node.early import tell_peers

        return tell_peers(self.config, error, session=session_id(self.config.output.run_id + ":predict"),
                          when="scoring")

    def read_input(self, table_path: Path | None, ids_path: Path | None) -> tuple[Any, list[str] | None]:
        """This party's table of the customers to score (``--input``) and the IDs asked for (``--ids``), if any."""
        columns = self.feature_columns
        if columns is None:
            return None, None
        if table_path is None:
            raise ConfigError(f"{self.name}: predict needs --input, this party's table of the customers to score")
        from vsplit.data.sources import read_table

        d = self.config.data
        table = read_table(table_path, id_column=d.id_column, features=columns or None, option="--input")
        if ids_path is None:
            return table, None
        id_table = read_table(ids_path, id_column=d.id_column, features=[], option="--ids")
        requested = [str(v).strip() for v in id_table[d.id_column]]
        table = table[table[d.id_column].astype(str).isin(set(requested))].reset_index(drop=True)
        return table, requested

    def write_json(self, name: str, payload: Any) -> Path:
        """Write ``payload`` as ``name`` in this party's run folder, atomically."""
        return write_json(self.folder / name, payload, within=self.folder)

    # -- what a party keeps: its model and its checkpoints ------------------------------------------------------------
    def save_parts(self, segments: Mapping[str, Any], party: Any, **fields: Any) -> Path:
        """``model.npz``: this party's own ``segments``, ``fields`` (the set-up it is checked against when loaded) and,
        where ``party`` holds a table, its columns and preprocessing; nothing of a peer's."""
        state: dict[str, Any] = {"party": self.name, "role": self.role, **fields,
                                 "segments": {s: m.state_dict() for s, m in segments.items()}}
        if getattr(party, "feature_columns", None) is not None:
            state.update(feature_columns=party.feature_columns, id_column=party.id_column)
            if party.preprocessor is not None:
                state["preprocessor"] = party.preprocessor.state()
        path = self.folder / "model.npz"
        save_checkpoint(path, state, run_id=self.config.output.run_id, party=self.name)
        return path

    def load_parts(self, party: Any, **fields: Any) -> dict[str, Any]:
        """This party's ``model.npz``, checked to be its own role's and to have the ``fields`` of this config's
        set-up; ``party``'s preprocessing is loaded from it."""
        from vsplit.data.preprocess import TablePreprocessor

        path = self.folder / "model.npz"
        if not path.is_file():
            raise CheckpointError(f"{self.name}: no trained model at {path}; train first (vsplit train --config ...)")
        state = load_checkpoint(path, run_id=self.config.output.run_id, party=self.name)
        if state.get("role") != self.role:
            raise CheckpointError(f"{path} is a {state.get('role')} party's model, not {self.role}")
        changed = [k for k, v in fields.items() if state.get(k) != v]
        if changed:
            raise CheckpointError(f"{path} was trained with another {' and '.join(changed)} than "
                                  f"{self.config.source} describes; predict with the config it was trained with")
        if party is not None and "preprocessor" in state:
            with interpreting(path):
                party.preprocessor = TablePreprocessor.from_state(state["preprocessor"])
        return state

    def checkpoint_path(self, kind: str, index: int) -> Path:
        """This party's checkpoint ``index`` of ``kind`` (``"epoch"``, ``"round"``)."""
        return self.folder / "checkpoints" / f"{kind}-{index:04d}.npz"

    def newest_checkpoint(self, kind: str, restore: Callable[[int], Any], *, required: bool) -> int:
        """With ``--resume``, the index of this party's newest readable checkpoint of ``kind`` (an unreadable one,
        e.g. truncated by a crash, is passed over and said so), -1 for none unless ``required``; without it, every
        old checkpoint goes and -1."""
        found = sorted((self.folder / "checkpoints").glob(f"{kind}-*.npz"))
        if not self.resume:
            for stale in found:
                stale.unlink()
            return -1
        path, skipped = newest_readable(found, lambda p: restore(_index(p)), party=self.name)
        if path is None and required:
            problem = f"is readable: {'; '.join(skipped)}" if found else f"in {self.folder / 'checkpoints'}"
            raise CheckpointError(f"{self.name}: --resume given but no checkpoint {problem}; start without --resume")
        if path is not None and skipped:
            note = f"{self.name}: --resume resumes from {path.name}, unless a peer holds only an earlier one"
            logging.getLogger(__name__).warning("%s", note)
            print(f"vsplit: warning: {note}", file=sys.stderr)
        return -1 if path is None else _index(path)


def _index(path: Path) -> int:
    return int(path.stem.split("-")[1])


def iter_one(machine: Any) -> Any:
    """A session of one stage: ``machine``, then its result."""
    return (yield "score", machine)


def _run_stage(pump: Pump, stage: str, machine: Any, *, progress: bool = False) -> Any:
    if stage.endswith("psi"):  # an alignment: its stats get the wall time and the bytes sent
        from vsplit.runtime.psi import run_party

        if not progress:
            return run_party(pump, machine)
        from vsplit.runtime.progress import TrafficProgress

        bar = TrafficProgress(desc=f"{pump.me} {stage.replace('psi', 'PSI')}")
        pump.taps.append(bar)
        try:
            return run_party(pump, machine)
        finally:
            pump.taps.remove(bar)
            bar.close()
    return pump.run(machine)
