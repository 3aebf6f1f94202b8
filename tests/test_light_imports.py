"""Start-up stays light: the package, the CLI's help, a config load and the PSI workers never import PyTorch,
pandas or scikit-learn, and the PSI protocol never imports the runtime.

Each check runs in a fresh interpreter (this test process already holds torch through conftest).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import vsplit

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "pandas", "sklearn", "matplotlib")


def loaded_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; return the heavy top-level modules it left in ``sys.modules``."""
    probe = f"\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code) + probe], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_vsplit_loads_no_torch_pandas_or_sklearn():
    assert loaded_after("import vsplit") == []


def test_the_probe_sees_a_heavy_import():
    assert loaded_after("import vsplit, pandas") == ["pandas"]


def test_every_lazy_public_name_points_at_an_existing_module():
    lazy = vsplit._LAZY
    assert set(lazy) <= set(vsplit.__all__)
    eager = set(vsplit.__all__) - set(lazy)
    assert all(name in vars(vsplit) for name in eager), "names outside the lazy table are imported eagerly"
    for name, target in lazy.items():
        module, _, attribute = target.partition(":")
        assert importlib.util.find_spec(module) is not None, f"{name}: no module {module}"
        assert attribute == name


def test_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "vsplit.cli.main", "--version"], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"vsplit {vsplit.__version__}"


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["keys", "--help"], ["psi", "--help"],
                                  ["privacy", "audit", "--help"]])
def test_command_help_loads_no_heavy_library(argv):
    code = f"""
    from vsplit.cli.main import main
    try:
        main({argv!r})
    except SystemExit:
        pass
    """
    assert loaded_after(code) == []


def test_loading_the_bank_config_with_a_defense_does_not_import_torch():
    code = """
    from vsplit.config import load_config
    config = load_config("parties/bank/party.toml", check_files=False, overrides=['privacy.defenses=["clip_noise"]'])
    assert tuple(config.privacy.defenses) == ("clip_noise",)
    """
    assert loaded_after(code) == []


def test_a_defense_option_is_still_checked_when_the_config_loads():
    from vsplit.config import load_config
    from vsplit.errors import ConfigError

    with pytest.raises(ConfigError, match=r"privacy\.defenses\[0\]: defense 'clip_noise' has no option 'sigma'"):
        load_config(REPO / "parties/bank/party.toml", check_files=False,
                    overrides=['privacy.defenses=["clip_noise:sigma=2"]'])


def test_the_light_defense_catalog_matches_the_registry():
    from vsplit.privacy.defenses import names, sides
    from vsplit.privacy.defenses.registry import DEFENSES

    assert names() == DEFENSES.names()
    for name in names():
        factory = DEFENSES.get(name)
        assert sides(name) == {getattr(factory, "func", factory).side}, name


def test_psi_protocol_modules_never_import_the_runtime_or_torch():
    code = """
    import pkgutil, importlib, sys
    import vsplit.psi
    for info in pkgutil.iter_modules(vsplit.psi.__path__):
        importlib.import_module(f"vsplit.psi.{info.name}")
    runtime = sorted(m for m in sys.modules if m.startswith(("vsplit.runtime", "vsplit.transport", "vsplit.cli")))
    assert not runtime, runtime
    """
    assert loaded_after(code) == []


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the workers' memory maps from /proc")
def test_psi_workers_load_no_heavy_library_even_when_the_parent_did(tmp_path):
    # A user's script: torch is imported by the parent, inside the main guard, before the pool starts.
    script = tmp_path / "align.py"
    script.write_text(textwrap.dedent(f"""
        import json
        import numpy as np
        from vsplit.psi import ProcessBackend, SerialBackend

        def mapped(pid):
            text = open(f"/proc/{{pid}}/maps").read()
            return sorted(name for name in {HEAVY!r} if f"/site-packages/{{name}}/" in text)

        if __name__ == "__main__":
            import torch  # noqa: F401
            points = np.full((64, 32), 9, np.uint8)
            with ProcessBackend(workers=2, min_split=1) as pool:
                blinded = pool.blind(points, scalar=bytes(32))
                same = bool((blinded == SerialBackend().blind(points, scalar=bytes(32))).all())
                workers = {{pid: mapped(pid) for pid in pool.worker_pids()}}
            print(json.dumps({{"same": same, "parent": mapped("self"), "workers": list(workers.values())}}))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["same"] is True
    assert "torch" in report["parent"], "the probe must see torch where it is loaded"
    assert report["workers"] == [[], []]


def test_a_lazy_function_named_like_its_module_stays_the_function_after_the_module_loads(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from vsplit.lazy import lazy_attributes\n"
        "__getattr__, __dir__ = lazy_attributes(__name__, {'audit': 'pkg.audit:audit'})\n"
    )
    (package / "audit.py").write_text("def audit():\n    return 'ran'\n")
    code = f"""
    import sys
    sys.path.insert(0, {str(tmp_path)!r})
    from pkg.audit import audit as direct
    from pkg import audit
    assert audit is direct and audit() == "ran", audit
    """
    assert loaded_after(code) == []
