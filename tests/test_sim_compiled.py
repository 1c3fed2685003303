"""The compiled simulator modules (setup.py, docs/simulator.md "Compiled hot loop"): same numbers, stale guard."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hydra_opt.evaluate.simulator import compiled_modules

ROOT = Path(__file__).resolve().parents[1]
COMPILED = any(compiled_modules().values())
needs_compiled = pytest.mark.skipif(not COMPILED, reason="the simulator is not compiled in this install")

_RUN = """
import json
from hydra_opt.evaluate import Scenario, simulate
from hydra_opt.evaluate.simulator import compiled_modules
r = simulate(r"{design}", "nemotron-h-4b", "hydra-chat",
             scenario=Scenario.paper(horizon_s=4.0, n_requests=600))
print(json.dumps({"compiled": compiled_modules(), "events": r.events, "tp": r.throughput_tok_s.hex(),
                  "ttft": r.ttft_mean_s.hex(), "tpot": r.tpot_mean_s.hex(), "done": r.completed_requests}))
"""


def _run(env_extra: dict[str, str], pythonpath: Path | None = None) -> tuple[dict, str]:
    env = dict(os.environ, **env_extra)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    # cwd: the package under test must come first on sys.path ("-c" puts the working directory there)
    code = _RUN.replace("{design}", str(ROOT / "studies/designs/fig10-nemotron-h-4b-chat-mt-cp.yaml"))
    p = subprocess.run([sys.executable, "-W", "always", "-c", code], cwd=pythonpath or ROOT, env=env, capture_output=True,
                       text=True, check=True)
    return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr


@needs_compiled
def test_compiled_and_pure_give_bit_identical_results():
    fast, _ = _run({})
    pure, _ = _run({"HYDRA_OPT_PURE_PYTHON": "1"})
    assert all(fast["compiled"].values()) and not any(pure["compiled"].values())
    assert fast["events"] > 1000  # a run long enough to exercise flows, re-timing and batching
    for key in ("events", "tp", "ttft", "tpot", "done"):
        assert fast[key] == pure[key], key


@needs_compiled
def test_a_stale_compiled_module_is_not_used(tmp_path):
    pkg = tmp_path / "hydra_opt"
    shutil.copytree(ROOT / "hydra_opt", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    src = pkg / "evaluate/simulator/flows.py"
    src.write_text(src.read_text() + "\n# edited after the build\n")
    got, err = _run({}, pythonpath=tmp_path)
    # All or none: the compiled engine uses the compiled flow model's C types.
    assert got["compiled"] == {"flows": False, "engine": False}
    assert "compiled flows module is older than flows.py" in err
    ref, _ = _run({"HYDRA_OPT_PURE_PYTHON": "1"})
    assert got["tp"] == ref["tp"] and got["events"] == ref["events"]


def test_build_ext_without_cython_fails_with_one_line(tmp_path):
    """``setup.py build_ext`` asks for the compiled modules by name: without Cython it fails and says so (a
    ``pip install`` keeps the pure-Python fallback and only warns)."""
    fake = tmp_path / "Cython"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no Cython here')\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    env.pop("HYDRA_OPT_PURE_PYTHON", None)
    out = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0
    assert "needs Cython" in out.stderr and "nothing was built" in out.stderr
    assert "Traceback" not in out.stderr
