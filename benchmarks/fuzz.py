"""Coverage-guided fuzzing of every decoder of untrusted bytes with Atheris (libFuzzer for Python): `make fuzz`.

    .venv/bin/python benchmarks/fuzz.py                              # every target, 60 s each
    .venv/bin/python benchmarks/fuzz.py --seconds 10 --targets psi_messages config_file

Each target of benchmarks/fuzzing/targets.py (every message family a peer sends, every file format read from disk)
runs in its own process, instrumented, for --seconds, starting from its seed corpus kept in the repository
(benchmarks/fuzzing/corpus/TARGET/); the inputs it finds that reach new code go to runs/fuzz/TARGET/corpus/ (not the
repository's corpus, unless --grow-corpus). An input is a *crash* when decoding it raises anything but vsplit's own
errors (vsplit.errors.VsplitError); the run goes on after one, so every distinct crash (exception type and the line
that raised it) is counted, and the first input of each is saved to runs/fuzz/TARGET/crash-*. A single input that
takes over --timeout seconds is a *hang* and one that takes the process over --rss-limit-mb an *out-of-memory*: both
stop that target (libFuzzer saves the input as timeout-* or oom-*).

Prints one JSON object and writes it to benchmarks/results-fuzz.json (--out): per target the executions run, the
crashes found (distinct, with where), hangs, out-of-memory, the corpus size at the end, and the load average. With
--merge the targets of --out not run now are kept (this run's settings and load average go under merged_runs); with
--before FILE (a run on the code before its fixes, e.g. with PYTHONPATH pointing at that code) each target also
gets before_fixes: the executions and the distinct crashes found there.
Needs the `fuzz` extra: pip install -e '.[fuzz]'.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: pure-Python code outside vsplit that a target's input drives, instrumented too (coverage guides the fuzzer there)
EXTRA_COVERAGE = {"config_file": ("tomllib",), "parquet_table": ("pyarrow.pandas_compat",),
                  "tune_study_file": ("optuna.storages.journal",)}


def worker(name: str, argv: list[str], crashes_file: Path) -> None:
    """Fuzz one target in this process (started by :func:`run_target`): libFuzzer's flags in ``argv``."""
    import atheris

    sys.path.insert(0, str(HERE))
    with atheris.instrument_imports(include=["vsplit", "fuzzing", *EXTRA_COVERAGE.get(name, ())]):
        from fuzzing.targets import TARGETS, expected

        target = TARGETS[name]
        for seed in target.seeds():  # imports (and so instruments) every module the target reaches lazily
            try:
                target.run(seed)
            except Exception:
                pass
    seen: set[str] = set()

    def one_input(data: bytes) -> None:
        try:
            target.run(data)
        except Exception as exc:
            if expected(exc):
                return
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            where = f"{type(exc).__name__} at {Path(frame.filename).name}:{frame.lineno} ({frame.name})"
            if where not in seen:
                seen.add(where)
                digest = __import__("hashlib").sha1(data).hexdigest()[:16]
                (crashes_file.parent / f"crash-{digest}").write_bytes(data)
                with crashes_file.open("a") as f:
                    f.write(json.dumps({"where": where, "message": str(exc)[:300], "input": f"crash-{digest}"}) + "\n")

    atheris.Setup(argv, one_input)
    atheris.Fuzz()


def run_target(name: str, *, seconds: float, timeout: int, rss_limit_mb: int, out: Path, grow: bool) -> dict:
    """Fuzz target ``name`` in a child process for ``seconds``; what it ran and found."""
    sys.path.insert(0, str(HERE))
    from fuzzing.targets import MAX_INPUT, corpus_dir

    folder = out / name
    work = folder / "corpus"
    work.mkdir(parents=True, exist_ok=True)
    crashes_file = folder / "crashes.jsonl"
    crashes_file.unlink(missing_ok=True)
    seeds = corpus_dir(name)
    corpora = [str(seeds if grow else work), *([] if grow else [str(seeds)])]
    flags = [f"-max_total_time={int(seconds)}", f"-timeout={timeout}", f"-rss_limit_mb={rss_limit_mb}",
             f"-max_len={min(MAX_INPUT, 64 * 1024)}", f"-artifact_prefix={folder}/", "-print_final_stats=1"]
    started = time.perf_counter()
    child = subprocess.run(
        [sys.executable, __file__, "--worker", name, "--crashes-file", str(crashes_file), "--", *flags, *corpora],
        capture_output=True, text=True, cwd=ROOT, timeout=seconds + 10 * timeout + 120,
    )
    log = child.stderr
    (folder / "libfuzzer.log").write_text(log)
    runs = re.findall(r"stat::number_of_executed_units:\s*(\d+)", log) or re.findall(r"Done (\d+) runs", log)
    crashes = [json.loads(line) for line in crashes_file.read_text().splitlines()] if crashes_file.exists() else []
    return {
        "executions": int(runs[-1]) if runs else None,
        "crashes": len(crashes),
        "crash_kinds": crashes,
        "hangs": len(list(folder.glob("timeout-*"))),
        "out_of_memory": len(list(folder.glob("oom-*"))),
        "seconds": round(time.perf_counter() - started, 1),
        "exit_code": child.returncode,
        "corpus_files": len(list((seeds if grow else work).iterdir())),
        "seed_files": len(list(seeds.iterdir())),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        split = argv.index("--")
        worker(argv[1], [sys.argv[0], *argv[split + 1 :]], Path(argv[3]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sys.path.insert(0, str(HERE))
    from fuzzing.targets import TARGETS

    parser.add_argument("--targets", nargs="+", default=sorted(TARGETS), choices=sorted(TARGETS))
    parser.add_argument("--seconds", type=float, default=60.0, help="fuzzing time per target")
    parser.add_argument("--timeout", type=int, default=10, help="seconds one input may take before it is a hang")
    parser.add_argument("--rss-limit-mb", type=int, default=2048, help="memory that makes an input out-of-memory")
    parser.add_argument("--work", default="runs/fuzz", help="where grown corpora and crash inputs go")
    parser.add_argument("--grow-corpus", action="store_true", help="add new inputs to the repository's seed corpus")
    parser.add_argument("--out", default=str(HERE / "results-fuzz.json"))
    parser.add_argument("--merge", action="store_true", help="keep the targets of --out not run now (their own "
                        "settings and load average were the earlier run's: see merged_runs)")
    parser.add_argument("--before", default=None, help="a result file of a run on the code before the fixes: each "
                        "target's crashes there go under before_fixes")
    args = parser.parse_args(argv)
    try:
        import atheris  # noqa: F401
    except ImportError:
        print("benchmarks/fuzz.py needs Atheris: pip install -e '.[fuzz]' (or run `make fuzz`)", file=sys.stderr)
        return 2
    load_before = os.getloadavg()
    before = json.loads(Path(args.before).read_text())["targets"] if args.before else {}
    earlier = json.loads(Path(args.out).read_text()) if args.merge and Path(args.out).exists() else {}
    results = {}
    for name in args.targets:
        results[name] = run_target(name, seconds=args.seconds, timeout=args.timeout, rss_limit_mb=args.rss_limit_mb,
                                   out=Path(args.work).resolve(), grow=args.grow_corpus)
        results[name]["about"] = TARGETS[name].about
        if name in before:
            found = before[name]
            results[name]["before_fixes"] = {"executions": found["executions"], "seconds": found["seconds"],
                                             "crashes": found["crashes"],
                                             "crash_kinds": sorted({c["where"] for c in found["crash_kinds"]})}
        print(f"{name}: {results[name]['executions']} executions, {results[name]['crashes']} crashes, "
              f"{results[name]['hangs']} hangs, {results[name]['out_of_memory']} out-of-memory", file=sys.stderr)
    settings = {"seconds_per_target": args.seconds, "timeout": args.timeout, "rss_limit_mb": args.rss_limit_mb,
                "atheris": __import__("importlib.metadata").metadata.version("atheris"),
                "python": sys.version.split()[0]}
    load = {"before": [round(v, 2) for v in load_before], "after": [round(v, 2) for v in os.getloadavg()]}
    report: dict = {"settings": settings, "load_average": load}
    if earlier:  # the earlier run's settings stay on top; this run's are listed with its targets
        report = {"settings": earlier["settings"], "load_average": earlier["load_average"],
                  "merged_runs": [*earlier.get("merged_runs", []), {"targets": sorted(results), "settings": settings,
                                                                    "load_average": load}]}
        results = {**{k: v for k, v in earlier["targets"].items() if k not in results}, **results}
    report.update({
        "targets": results,
        "executions": sum(r["executions"] or 0 for r in results.values()),
        "crashes": sum(r["crashes"] for r in results.values()),
        "hangs": sum(r["hangs"] for r in results.values()),
        "out_of_memory": sum(r["out_of_memory"] for r in results.values()),
    })
    text = json.dumps(report, indent=2)
    Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
