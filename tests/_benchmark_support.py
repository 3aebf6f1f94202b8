"""A benchmark script of ``benchmarks/`` loaded as a module, so a test can check the pieces that decide its figures."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def benchmark_module(script: str, name: str) -> Iterator[ModuleType]:
    """Yield ``benchmarks/SCRIPT`` loaded as module ``name``, with ``benchmarks/`` on the path while it is in use
    (a fixture's body: ``yield from benchmark_module("quality.py", "quality_benchmark")``)."""
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / script)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))
