"""Malformed configuration files: each one exits 2 from ``python -m hydra_opt validate`` with a one-line message
naming the file and the key (or, for files that cannot be parsed at all, the file and the problem).

The fast test drives the CLI's entry point (``hydra_opt.cli.main.main``, what ``python -m hydra_opt`` runs) in
process; the ``slow`` test runs every file through a separate ``python -m hydra_opt validate FILE`` process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hydra_opt.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
BAD = Path(__file__).resolve().parent / "fixtures" / "bad_configs"

#: file (relative to BAD) -> text the message must contain after the file name (the key, or the problem).
EXPECTED = {
    "design_unknown_key.yaml": "max_bacth: is not a known key; allowed: batching",
    "design_typo_chiplet.yaml": "chiplets.tscs_pp: 'tscs_pp' is not a known chiplet; allowed:",
    "design_negative_count.yaml": "chiplets.marca_p: -1 must be >= 0",
    "design_nan_bw.yaml": "d2d_bw_gbps: nan is not a finite number",
    "design_inf_bw.yaml": "d2d_bw_gbps: inf is not a finite number",
    "design_huge_bw.yaml": "d2d_bw_gbps: 1e+300 is too large",
    "design_string_batch.yaml": "max_batch: 'sixteen' is not an integer",
    "design_float_nmem.yaml": "n_mem: 6.5 is not an integer",
    "design_bool_count.yaml": "chiplets.tscs_p: True is not an integer",
    "design_bad_placement.yaml": "placement: 'bw' is not one of: cp, rr, random",
    "design_bad_scheduler.yaml": "scheduler: 'round_robin' is not one of:",
    "design_bad_memory.yaml": "memory: 'hbm4' is not one of: gddr7, hbm3, hbm3e",
    "design_bad_precision.yaml": "precision: 'int3' is not a precision; allowed:",
    "design_missing_nmem.yaml": "n_mem: is required",
    "design_chiplets_list.yaml": "chiplets: must be a mapping, got list",
    "design_too_many_chiplets.yaml": "chiplets: 20 compute + 8 memory chiplets = 28 exceed the 24 slots",
    "design_hbm_off_ring.yaml": "n_mem: 18 memory chiplets exceed the 16 outer-ring slots",
    "design_zero_batch.yaml": "max_batch: 0 must be >= 1",
    "design_grid_zero.yaml": "package.grid_w: 0 must be >= 1",
    "design_d2d_no_room.yaml": "chiplets.tscs_d: area",
    "design_dynacore_policy.yaml": "dynacore.meu_policy: 'random' is not one of: adaptive, fixed",
    "design_dynacore_shape.yaml": "dynacore.meu_shape: [4, 8] must have at least 3 item(s)",
    "design_empty.yaml": "is empty; expected a mapping",
    "design_not_utf8.yaml": "is not UTF-8 text",
    "design_duplicate_key.yaml": "duplicate key 'n_mem'",
    "design_bad_yaml.yaml": "is not valid YAML (line 3",
    "unknown_kind.yaml": "kind: 'desing' is not a known kind; allowed:",
    "no_kind.yaml": "has no 'kind:' key",
    "designs/folder_kind_unknown_key.yaml": "batch: is not a known key",
    "designs/root_is_list.yaml": "must be a mapping, got list",
    "memory_negative_capacity.yaml": "capacity_gib: -16 is not a positive number",
    "memory_peak_below_usable.yaml": "peak_bw_gbps: 819.2 must be >= bw_gbps (900)",
    "chiplets_unknown_core.yaml": "chiplets.tiny_p.core: 'tscz' is not a core of the technology table; allowed: tscs",
    "chiplets_bad_phase.yaml": "chiplets.tiny_p.phases[0]: 'prefil' is not one of: prefill, decode",
    "chiplets_overfull.yaml": "chiplets.tiny_p.compositions[0]: area 146.38 mm² exceeds the 121 mm² slot",
    "chiplets_negative_area.yaml": "technology.cores.tscs.area_mm2: -1.3129 is not a positive number",
    # kinds owned by the workload layer, detected from the parent folder:
    "models/typo_hidden_size.yaml": "hidden_size: is required",
    "workloads/negative_rate.yaml": "arrival.rate_per_s: -1.0 is not a positive number",
    "workloads/unknown_profile.yaml": "lengths.profile: 'arxivv' is not a shipped length profile",
}


def test_every_fixture_has_an_expectation() -> None:
    files = {p.relative_to(BAD).as_posix() for p in BAD.rglob("*.yaml")}
    assert files == set(EXPECTED)
    assert len(files) >= 20


def _check(rel: str, rc: int, out: str, err: str) -> None:
    path = str(BAD / rel)
    assert rc == 2, (rel, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"hydra_opt: error: {path}: "), lines[0]
    assert EXPECTED[rel] in lines[0], lines[0]
    assert "ok:" not in out


@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_bad_config_exits_2_in_process(rel: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["validate", str(BAD / rel)])
    captured = capsys.readouterr()
    _check(rel, rc, captured.out, captured.err)


def test_bad_configs_through_python_dash_m() -> None:
    # Three representative files through a real process (the rest: the slow test below).
    for rel in ("design_unknown_key.yaml", "design_not_utf8.yaml", "designs/folder_kind_unknown_key.yaml"):
        r = subprocess.run(
            [sys.executable, "-m", "hydra_opt", "validate", str(BAD / rel)], capture_output=True, text=True, timeout=120
        )
        _check(rel, r.returncode, r.stdout, r.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("rel", sorted(EXPECTED))
def test_bad_config_exits_2_subprocess(rel: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "hydra_opt", "validate", str(BAD / rel)], capture_output=True, text=True, timeout=120
    )
    _check(rel, r.returncode, r.stdout, r.stderr)


def test_shipped_configs_validate(capsys: pytest.CaptureFixture[str]) -> None:
    files = sorted(str(p) for p in (ROOT / "hydra_opt" / "data" / "chiplets").glob("*.yaml"))
    files += sorted(str(p) for p in (ROOT / "hydra_opt" / "data" / "memory").glob("*.yaml"))
    files += sorted(str(p) for p in (ROOT / "studies" / "designs").glob("*.yaml"))
    files += sorted(str(p) for p in (ROOT / "hydra_opt" / "data" / "models").glob("*.yaml"))
    files += sorted(str(p) for p in (ROOT / "hydra_opt" / "data" / "workloads").glob("*.yaml"))
    assert len(files) >= 29
    assert main(["validate", *files]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(files) and all(line.startswith("ok: ") for line in out)


def test_every_file_is_checked(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad file does not hide the files after it (issue 19): one line each, exit 2 if any is bad."""
    good = str(ROOT / "hydra_opt" / "data" / "memory" / "hbm3.yaml")
    rc = main(["validate", good, str(BAD / "design_empty.yaml"), good, str(BAD / "design_empty.yaml")])
    captured = capsys.readouterr()
    assert rc == 2 and captured.out.count("ok: ") == 2
    assert captured.err.count("hydra_opt: error: ") == 2 and captured.err.count("\n") == 2


def test_kind_registry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hydra_opt.config import kinds

    folder = tmp_path / "designs"
    folder.mkdir()
    f = folder / "d.yaml"
    f.write_text("chiplets: {tscs_p: 1, tscs_d: 1}\nn_mem: 2\n")
    assert kinds.detect_kind(f) == "design"
    other = tmp_path / "x.yaml"
    other.write_text("kind: my_test_kind\nvalue: 3\n")
    kinds.register_kind("my_test_kind", "hydra_opt.hardware.memory:validate_memory_file", folders=("my_test_folder",))
    try:
        assert kinds.detect_kind(other) == "my_test_kind"
        rc = main(["validate", str(other)])
        err = capsys.readouterr().err
        assert rc == 2 and f"{other}: kind: 'my_test_kind' is not one of: memory" in err
    finally:
        kinds.KINDS.pop("my_test_kind", None)
        kinds.FOLDER_KINDS.pop("my_test_folder", None)
    with pytest.raises(ValueError):
        kinds.register_kind("bad", "no_colon")
