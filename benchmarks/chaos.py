"""Chaos benchmark: pilots run as OS processes over mutual TLS while a controller injects random faults; prints JSON.

Two pilots, each party its own ``vsplit`` process on 127.0.0.1:

* ``vertical3``: a bank (labels, listens) and two partners, shop and telco (``vsplit train``), on the bundled UCI
  bank sample split three ways by columns (as ``tests/_three_party_support.py`` does);
* ``splitfed4``: four banks with the same columns, a server and a federated server (SplitFed v1, ``vsplit run``),
  on ``default_credit`` rows dealt to the banks.

Every dialing party reaches its hub through a TCP relay on loopback (``benchmarks/linkem.py``), so the controller
can reset its connection. Each run draws its faults from the seed:

  tcp_reset             the relay resets a partner's connection (a TCP RST to both ends), at a random moment
  pause_under_timeout   SIGSTOP a random party for 0.5..2 s (under ``network.read_timeout_s``), then SIGCONT
  pause_past_timeout    SIGSTOP a random party past ``network.read_timeout_s``, then SIGCONT: the run stops
  kill_resume           SIGKILL a random party: the run stops
  disk_full             fill the small tmpfs that holds a random party's run folder (checkpoints): the run stops
  corrupt_checkpoint    before a restart, flip bytes in, or truncate, a random party's newest checkpoint

The stopping kinds come in turn (an order drawn from the seed) and every other stop is followed by a corruption, so
every kind is injected in a run of the benchmark whatever its draws.

After a run stops, the controller frees the disk, applies a planned corruption, and restarts every party with
``--resume`` (from scratch if a party has no checkpoint yet), up to ``--attempts`` times. A SplitFed bank that
vanishes is dropped by design (the round completes without it) and then restarted with ``--resume`` alone; it comes
back as a new process (``vsplit.horizontal.readmit``).

A run ends as one of:
  same_result           every party exited 0 and every party's model.npz equals, array for array, the model of the
                        same pilot run once without faults
  dropped_by_design     SplitFed went on without a bank that vanished (the server's result.json names it in
                        ``lost``); the parameters then differ from the uninterrupted run, as documented
  clean_error           it stopped, and stayed stopped after the last attempt, with a clear error: every failed
                        process said ``vsplit: error:`` and none printed a traceback
  lost_or_hung          anything else: a process still running at the attempt deadline (killed), parameters that
                        differ without a documented reason, a traceback, or a non-zero exit without a clear error
                        (goal: 0)

Keys: ``faults`` (injected, by kind), ``same_result``, ``dropped_by_design``, ``clean_error``, ``lost_or_hung``,
``runs`` (each run's pilot, faults and outcome), ``seconds``, ``load_average``, ``disk_full_on`` (``tmpfs``, or why
that fault was left out).

Run: .venv/bin/python benchmarks/chaos.py [--faults 50] [--seed 0] [--out benchmarks/results-chaos.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from linkem import LinkEmulator

from vsplit.atomic import write_atomic

HERE = Path(__file__).resolve().parent
STOPPING = ("pause_past_timeout", "kill_resume", "disk_full")
PASSING = ("tcp_reset", "pause_under_timeout")
KINDS = (*PASSING, *STOPPING, "corrupt_checkpoint")
#: short timeouts so that a stopped run stops fast: a drop not back within 3 s is lost; 15 s of silence is an error
READ_TIMEOUT_S = 15.0
SETTINGS = ("network.reconnect_timeout_s=3", f"network.read_timeout_s={READ_TIMEOUT_S:g}",
            "network.connect_timeout_s=30")
TMPFS_BYTES = 8 << 20


# -- the pilots -------------------------------------------------------------------------------------------------------


@dataclass
class Pilot:
    """A prepared pilot: its folder (copied for each run), its command, the hub and who dials it."""

    name: str
    template: Path
    command: str
    run_id: str
    parties: list[str]
    hub: str
    #: parties that own a model.npz to compare
    owners: list[str]
    #: drops a vanishing party by design (SplitFed)
    drops: bool = False
    #: further ``--set`` settings of every party
    settings: tuple[str, ...] = ()
    reference: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    seconds: float = 0.0


def prepare_vertical3(root: Path, *, rows: int = 1200, epochs: int = 3, batch: int = 128) -> Pilot:
    """Bank, shop and telco on ``rows`` rows of the UCI bank sample, split three ways by columns."""

    from vsplit.datasets import load
    from vsplit.datasets.partition import partition_train_test
    from vsplit.pilot.configs import write_missing_configs
    from vsplit.pilot.prepare import ensure_keys, export_tables

    columns = {"bank": ["age", "job", "marital", "education", "y"], "shop": ["default", "balance", "housing", "loan"],
               "telco": ["contact", "day", "month", "duration", "campaign", "pdays", "previous", "poutcome"]}
    source = load("bank").sample(n=rows, random_state=0)
    tables = partition_train_test(source, columns=columns, label_party="bank", label="y", seed=0)
    export_tables(tables, root)
    ensure_keys(root, list(columns))
    configs = write_missing_configs(root, label="y", positive_label="yes",
                                    roles={"bank": "label", "shop": "feature", "telco": "feature"})
    for path in configs.values():
        text = path.read_text().replace('run_id = "pilot"', 'run_id = "chaos"')
        path.write_text(text + f"[train]\nepochs = {epochs}\nbatch_size = {batch}\npatience = 100\n")
    extra = "baselines = false\n"
    bank = configs["bank"].read_text().replace('run_id = "chaos"\n', 'run_id = "chaos"\n' + extra)
    configs["bank"].write_text(bank)
    make_init_seeds(configs)
    return Pilot("vertical3", root, "train", "chaos", list(columns), "bank", list(columns),
                 settings=('data.test_path=""',))  # training only: no scoring of test customers


def prepare_splitfed4(root: Path, *, rows: int = 120, epochs: int = 2, batch: int = 32) -> Pilot:
    """Four banks, a server and a federated server (SplitFed v1) on ``rows`` default-credit rows per bank."""
    from vsplit.pilot.horizontal import prepare_horizontal

    configs = prepare_horizontal(root, banks=4, run_id="chaos", rows=rows, federated=True,
                                 schedule={"kind": "splitfed_v1"}, train={"epochs": epochs, "batch_size": batch})
    parties = list(configs)
    make_init_seeds(configs)
    return Pilot("splitfed4", root, "run", "chaos", parties, "server", [p for p in parties if p != "fedserver"],
                 drops=True)


def make_init_seeds(configs: dict[str, Path]) -> None:
    """Each party's secret init seed, made once in the pilot's template: every run (its copy) and the uninterrupted
    reference then start from the same weights, as one organization's reruns do."""
    from vsplit.config import load_config
    from vsplit.models.secret import read_or_create, secret_path

    for path in configs.values():
        read_or_create(secret_path(load_config(path, check_files=False)))


# -- one run ----------------------------------------------------------------------------------------------------------


@dataclass
class Fault:
    kind: str
    #: seconds after the start of the attempt (passing and stopping faults); corrupt_checkpoint: before attempt n
    at: float
    victim: str = ""
    attempt: int = 0
    #: also wait until this holds (e.g. a checkpoint exists) before injecting
    when: Callable[[Run], bool] | None = None
    injected: bool = False
    note: str = ""


class Run:
    """One pilot run in its own copy of the pilot's folder, its own ports and relays, and the faults to inject."""

    def __init__(self, pilot: Pilot, root: Path, *, tmpfs: bool) -> None:
        from vsplit.transport.ports import free_ports

        self.pilot, self.root = pilot, root
        shutil.copytree(pilot.template, root, ignore=shutil.ignore_patterns("runs"))
        configs = {p: root / p / "party.toml" for p in pilot.parties}
        old = sorted({int(m) for c in configs.values() for m in re.findall(r"127\.0\.0\.1:(\d+)", c.read_text())})
        new = dict(zip(old, free_ports(len(old)), strict=True))
        hub_port = None
        for path in configs.values():
            text = re.sub(r"127\.0\.0\.1:(\d+)", lambda m: f"127.0.0.1:{new[int(m.group(1))]}", path.read_text())
            path.write_text(text)
            if f'name = "{pilot.hub}"' in text:
                hub_port = int(re.search(r'listen = "127\.0\.0\.1:(\d+)"', text).group(1))
        assert hub_port is not None
        self.configs = configs
        #: one relay per party dialing the hub: the controller resets its connection
        self.relays: dict[str, LinkEmulator] = {}
        self.via: dict[str, list[str]] = {}
        for party, path in configs.items():
            if re.search(rf'^dial = "127\.0\.0\.1:{hub_port}"', path.read_text(), flags=re.M):
                relay = self.relays[party] = LinkEmulator(target=("127.0.0.1", hub_port), target_retry_s=30)
                self.via[party] = ["--set", f"network.dial=127.0.0.1:{relay.address[1]}"]
        self.runs = root / "runs" / pilot.run_id
        self.mounts: dict[str, Path] = {}
        self.tmpfs = tmpfs
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, list[Path]] = {p: [] for p in pilot.parties}
        self.filler: Path | None = None
        #: parties still running at an attempt's deadline (killed)
        self.hung: list[str] = []

    # -- processes --------------------------------------------------------------------------------------------------
    def start(self, parties: list[str], *, resume: bool, attempt: int) -> None:
        for party in parties:
            log = self.root / "logs" / f"{party}-{attempt}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            self.logs[party].append(log)
            args = [sys.executable, "-m", "vsplit.cli.main", self.pilot.command, "--config", str(self.configs[party]),
                    "--quiet", *(x for s in (*SETTINGS, *self.pilot.settings) for x in ("--set", s)),
                    *self.via.get(party, [])]
            if resume:
                args.append("--resume")
            handle = open(log, "w")  # the child owns it from here
            self.procs[party] = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT,
                                                 env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def running(self) -> list[str]:
        return [p for p, proc in self.procs.items() if proc.poll() is None]

    def wait(self, deadline: float) -> bool:
        """Wait until every process exited; False (and every process killed, named in ``hung``) past ``deadline``."""
        while self.running():
            if time.monotonic() > deadline:
                self.hung = self.running()
                for party in self.hung:
                    self.procs[party].send_signal(signal.SIGCONT)
                    self.procs[party].kill()
                    self.procs[party].wait()
                return False
            time.sleep(0.05)
        return True

    # -- faults -----------------------------------------------------------------------------------------------------
    def mount_tmpfs(self, party: str) -> str:
        """Put ``party``'s run folder on a small tmpfs (for disk_full); an explanation if that is not possible."""
        folder = self.runs / party
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_BYTES}", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode:
            return f"mount -t tmpfs failed ({done.stderr.strip() or done.returncode}): needs root"
        self.mounts[party] = folder
        return "tmpfs"

    def fill(self, party: str) -> None:
        folder = self.mounts[party]
        self.filler = folder / "filler.bin"
        try:
            with open(self.filler, "wb") as handle:
                while True:
                    handle.write(b"\0" * (256 << 10))
                    handle.flush()
        except OSError:
            pass  # ENOSPC: the disk is full

    def free(self) -> None:
        if self.filler is not None:
            self.filler.unlink(missing_ok=True)
            self.filler = None

    def corrupt(self, party: str, rng: random.Random) -> str:
        """Damage ``party``'s newest checkpoint; what was done, or why nothing was."""
        found = sorted((self.runs / party / "checkpoints").glob("*.npz"))
        if not found:
            return "no checkpoint yet"
        path = found[-1]
        data = bytearray(path.read_bytes())
        if rng.random() < 0.5:
            path.write_bytes(bytes(data[: rng.randrange(1, len(data))]))
            return f"{path.name} truncated"
        for _ in range(8):
            i = rng.randrange(len(data))
            data[i] ^= 0xFF
        path.write_bytes(bytes(data))
        return f"{path.name}: 8 bytes flipped"

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
        for relay in self.relays.values():
            relay.close()
        for folder in self.mounts.values():
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)

    # -- outcome ----------------------------------------------------------------------------------------------------
    def has_checkpoints(self) -> bool:
        return all(any((self.runs / p / "checkpoints").glob("*.npz")) for p in self.pilot.owners)

    def unclear(self, parties: list[str]) -> list[str]:
        """Parties whose last attempt failed without a clear error (a traceback, or no ``vsplit: error:``)."""
        bad = []
        for party in parties:
            text = self.logs[party][-1].read_text(errors="replace")
            if "Traceback" in text or "vsplit: error:" not in text:
                bad.append(party)
        return bad

    def models(self) -> dict[str, dict[str, np.ndarray]]:
        return {p: _arrays(self.runs / p / "model.npz") for p in self.pilot.owners}

    def lost_parties(self) -> list[str]:
        path = self.runs / self.pilot.hub / "result.json"
        try:
            return list(json.loads(path.read_text()).get("lost", []))
        except (OSError, ValueError):
            return []


def _arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of a model file but its metadata (which names the run and party)."""
    with np.load(path, allow_pickle=False) as archive:
        return {k: archive[k] for k in archive.files if k != "__meta__"}


def same_models(got: dict[str, dict[str, np.ndarray]], want: dict[str, dict[str, np.ndarray]]) -> bool:
    return got.keys() == want.keys() and all(
        got[p].keys() == want[p].keys() and all(np.array_equal(got[p][k], want[p][k]) for k in want[p])
        for p in want
    )


def reference(pilot: Pilot, work: Path) -> None:
    """Run the pilot once without faults (through the relays, as the chaos runs): its models and duration."""
    run = Run(pilot, work / f"{pilot.name}-reference", tmpfs=False)
    try:
        began = time.monotonic()
        run.start(pilot.parties, resume=False, attempt=0)
        if not run.wait(time.monotonic() + 600):
            raise RuntimeError(f"{pilot.name}: the uninterrupted run hung")
        codes = {p: proc.returncode for p, proc in run.procs.items()}
        if any(codes.values()):
            party = next(p for p, c in codes.items() if c)
            raise RuntimeError(f"{pilot.name}: the uninterrupted run failed: {party}:\n"
                               f"{run.logs[party][-1].read_text()[-3000:]}")
        pilot.seconds = time.monotonic() - began
        pilot.reference = run.models()
    finally:
        run.close()


class Rotation:
    """Which stopping fault comes next, and whether a corruption follows it: every stopping kind in turn (in an order
    drawn from the seed, drawn again after each round), a corruption after every other stop, so that a run of the
    benchmark injects every kind however its random draws fall."""

    def __init__(self, rng: random.Random, *, tmpfs: bool) -> None:
        self._rng = rng
        self._kinds = [k for k in STOPPING if tmpfs or k != "disk_full"]
        self._next: list[str] = []
        self._corrupt = False

    def stop(self) -> tuple[str, bool]:
        """The next stopping kind, and whether the restart after it finds a corrupted checkpoint."""
        if not self._next:
            self._next = self._rng.sample(self._kinds, len(self._kinds))
        self._corrupt = not self._corrupt
        return self._next.pop(), self._corrupt


def plan(pilot: Pilot, rng: random.Random, *, budget: int, rotation: Rotation) -> list[Fault]:
    """The faults of one run: 3..6 passing faults per attempt, one or two stopping ones (the rotation's), each
    followed by a corruption every other time."""
    stops = rng.choice([1, 1, 2]) if budget > 1 else 0
    faults: list[Fault] = []
    span = pilot.seconds  # the uninterrupted run, start-up included: faults fall in its first two thirds
    for attempt in range(stops + 1):
        for _ in range(rng.randint(3, 6)):
            faults.append(Fault(rng.choice(PASSING), rng.uniform(0.15, 0.65) * span, attempt=attempt))
        if attempt < stops:
            kind, corrupt = rotation.stop()
            faults.append(Fault(kind, rng.uniform(0.3, 0.7) * span, attempt=attempt))
            if corrupt:
                faults.append(Fault("corrupt_checkpoint", 0.0, attempt=attempt + 1))
    for fault in faults:
        fault.victim = rng.choice(list(pilot.parties))
    return faults[:max(1, budget)]


def run_with_faults(pilot: Pilot, root: Path, faults: list[Fault], rng: random.Random, *, tmpfs: bool,
                    attempts: int, attempt_timeout_s: float) -> tuple[str, dict[str, dict[str, np.ndarray]]]:
    """Run ``pilot`` once while injecting ``faults``: ``("finished", every party's model arrays)`` if every party
    finished, else ``(outcome, {})`` (see the module docstring); :func:`outcome` compares with the reference."""
    run = Run(pilot, root, tmpfs=tmpfs)
    try:
        disk = next((f for f in faults if f.kind == "disk_full"), None)
        if disk is not None and run.mount_tmpfs(disk.victim) != "tmpfs":
            disk.kind, disk.note = "kill_resume", "tmpfs unavailable"
        ended = _drive(run, faults, rng, attempts=attempts, attempt_timeout_s=attempt_timeout_s)
        return ended, run.models() if ended == "finished" else {}
    finally:
        run.close()


def outcome(ended: str, models: dict[str, dict[str, np.ndarray]], reference: dict[str, dict[str, np.ndarray]]) -> str:
    """A finished run is ``same_result`` if its models equal the uninterrupted run's, else ``lost_or_hung``."""
    if ended != "finished":
        return ended
    return "same_result" if same_models(models, reference) else "lost_or_hung"


def _drive(run: Run, faults: list[Fault], rng: random.Random, *, attempts: int, attempt_timeout_s: float) -> str:
    pilot = run.pilot
    resume = False
    for attempt in range(attempts):
        for fault in (f for f in faults if f.attempt == attempt and f.kind == "corrupt_checkpoint"):
            holders = [p for p in pilot.owners if any((run.runs / p / "checkpoints").glob("*.npz"))]
            if holders and fault.victim not in holders:
                fault.victim = rng.choice(holders)  # a party with a checkpoint to corrupt, if any has one
            fault.note = run.corrupt(fault.victim if fault.victim in pilot.owners else pilot.owners[0], rng)
            fault.injected = fault.note != "no checkpoint yet"
        began = time.monotonic()
        run.start(pilot.parties, resume=resume, attempt=attempt)
        timed = sorted((f for f in faults if f.attempt == attempt and f.kind != "corrupt_checkpoint"),
                       key=lambda f: f.at)
        for fault in timed:
            while run.running() and (time.monotonic() - began < fault.at
                                     or (fault.when is not None and not fault.when(run))):
                time.sleep(0.02)
            if not run.running():
                break
            _inject(run, fault, rng)
        if not run.wait(began + attempt_timeout_s):
            return "lost_or_hung"
        run.free()
        codes = {p: proc.returncode for p, proc in run.procs.items()}
        if pilot.drops and codes[pilot.hub] == 0 and run.lost_parties():
            lost = run.lost_parties()
            survivors = [p for p in pilot.parties if p not in lost]
            if any(codes[p] for p in survivors) or run.unclear([p for p in lost if codes[p] not in (0, -9)]):
                return "lost_or_hung"
            return "dropped_by_design"
        if not any(codes.values()):
            return "finished"
        failed = [p for p, c in codes.items() if c not in (0, -signal.SIGKILL)]
        if run.unclear(failed):
            return "lost_or_hung"
        # as the error says: --resume without a checkpoint to resume from (or none readable) starts again without it
        told = any("start without" in run.logs[p][-1].read_text(errors="replace") for p in failed)
        resume = run.has_checkpoints() and not told
    return "clean_error"


def _inject(run: Run, fault: Fault, rng: random.Random) -> None:
    proc = run.procs[fault.victim]
    if fault.kind == "tcp_reset":
        party = fault.victim if fault.victim in run.relays else rng.choice(sorted(run.relays))
        fault.victim = party
        run.relays[party].reset_now()
    elif fault.kind in ("pause_under_timeout", "pause_past_timeout"):
        pause = rng.uniform(0.5, 2.0) if fault.kind == "pause_under_timeout" else READ_TIMEOUT_S + 3
        proc.send_signal(signal.SIGSTOP)
        time.sleep(pause)
        proc.send_signal(signal.SIGCONT)
        fault.note = f"{pause:.1f} s"
    elif fault.kind == "kill_resume":
        if proc.poll() is not None:  # it had already exited: killing it now would inject nothing
            fault.note = f"{fault.victim} had already exited ({proc.returncode})"
            return
        proc.kill()
    elif fault.kind == "disk_full":
        run.fill(fault.victim)
    fault.injected = True


# -- the benchmark ----------------------------------------------------------------------------------------------------


def chaos(*, faults: int, seed: int, work: Path, pilots: list[str], attempts: int = 4, attempt_timeout_s: float = 600,
          budget_s: float = 3600, log: Callable[[str], None] = print) -> dict:
    """Run the pilots with random faults until ``faults`` were injected (or ``budget_s`` ran out); the results."""
    began = time.monotonic()
    rng = random.Random(seed)
    makers = {"vertical3": prepare_vertical3, "splitfed4": prepare_splitfed4}
    prepared = []
    for name in pilots:
        pilot = makers[name](work / f"{name}-template")
        reference(pilot, work)
        log(f"{name}: uninterrupted run {pilot.seconds:.1f} s")
        prepared.append(pilot)
    tmpfs_note = _probe_tmpfs(work)
    rotation = Rotation(rng, tmpfs=tmpfs_note == "tmpfs")
    injected: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    runs = []
    i = 0
    while sum(injected.values()) < faults and time.monotonic() - began < budget_s:
        pilot = prepared[i % len(prepared)]
        plan_ = plan(pilot, rng, budget=faults - sum(injected.values()), rotation=rotation)
        ended, models = run_with_faults(pilot, work / f"run-{i:03d}", plan_, rng, tmpfs=tmpfs_note == "tmpfs",
                                        attempts=attempts, attempt_timeout_s=attempt_timeout_s)
        result = outcome(ended, models, pilot.reference)
        done = [f for f in plan_ if f.injected]
        injected.update(f.kind for f in done)
        outcomes[result] += 1
        runs.append({"pilot": pilot.name, "outcome": result,
                     "faults": [{"kind": f.kind, "victim": f.victim, "attempt": f.attempt,
                                 **({"note": f.note} if f.note else {})} for f in done]})
        log(f"run {i} {pilot.name}: {result}; faults {[f.kind + ':' + f.victim for f in done]}")
        if result == "lost_or_hung":
            keep = Path(tempfile.gettempdir()) / f"vsplit-chaos-lost-seed{seed}-run{i:03d}"
            shutil.copytree(work / f"run-{i:03d}" / "logs", keep, dirs_exist_ok=True)
            log(f"  logs kept in {keep}")
        i += 1
    return {"faults": {k: injected.get(k, 0) for k in KINDS}, "faults_total": sum(injected.values()),
            "same_result": outcomes["same_result"], "dropped_by_design": outcomes["dropped_by_design"],
            "clean_error": outcomes["clean_error"], "lost_or_hung": outcomes["lost_or_hung"], "runs_total": len(runs),
            "runs": runs, "seed": seed, "seconds": round(time.monotonic() - began, 1),
            "uninterrupted_run_s": {p.name: round(p.seconds, 1) for p in prepared},
            "disk_full_on": tmpfs_note, "load_average": round(os.getloadavg()[0], 2)}


def _probe_tmpfs(work: Path) -> str:
    probe = work / "tmpfs-probe"
    probe.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)], capture_output=True,
                          text=True)
    if done.returncode:
        return (f"left out: mount -t tmpfs failed ({done.stderr.strip() or done.returncode}); the disk_full fault "
                "needs root (or CAP_SYS_ADMIN) to mount a small tmpfs")
    subprocess.run(["umount", str(probe)], capture_output=True)
    return "tmpfs"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faults", type=int, default=50, help="inject at least this many faults (default 50)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pilots", nargs="+", default=["vertical3", "splitfed4"], choices=["vertical3", "splitfed4"])
    parser.add_argument("--budget-s", type=float, default=3600, help="start no new run after this many seconds")
    parser.add_argument("--attempts", type=int, default=4, help="attempts per run (the first and the restarts)")
    parser.add_argument("--out", type=Path, default=HERE / "results-chaos.json")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the parties, relays and mounts go too
    with tempfile.TemporaryDirectory(prefix="vsplit-chaos-") as tmp:
        result = chaos(faults=args.faults, seed=args.seed, work=Path(tmp) / "work", pilots=args.pilots,
                       attempts=args.attempts, budget_s=args.budget_s,
                       log=lambda text: print(text, file=sys.stderr, flush=True))
    text = json.dumps(result, indent=2)
    print(text)
    write_atomic(args.out, (text + "\n").encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
