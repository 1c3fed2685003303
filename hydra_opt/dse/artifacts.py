"""Artifacts of promoted trials, uploaded to Optuna's artifact store so the dashboard shows them per trial.

For each simulated (model, workload) pair of a promoted trial:

* ``design.yaml`` — the design in ``kind: design`` form (``python -m hydra_opt simulate`` accepts it);
* ``<pair>_noi_link_util.png`` — mean utilisation of every directed NoI link (HYDRA Fig. 11 style heatmap);
* ``<pair>_requests.csv.gz`` — per-request metrics (arrival, first token, finish, tokens; gzip-compressed CSV).

A result that lacks link utilisation or per-request data simply produces fewer files; artifact failures never fail
a trial (they are recorded in the user attribute ``artifact_errors``).
"""

from __future__ import annotations

import gzip
import re
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
import yaml

from hydra_opt.evaluate.evaluators import SimOutcome

__all__ = ["upload_trial_artifacts", "write_design_yaml", "safe_name", "pair_label"]


def pair_label(pair: str) -> str:
    """``"model/workload"`` with file paths shortened to their stem (``llama-3-8b / quickstart-chat``)."""
    model, _, workload = pair.partition("/")
    short = lambda x: Path(x).stem if x.endswith((".yaml", ".yml", ".csv", ".jsonl", ".json")) else x  # noqa: E731
    return f"{short(model)} / {short(workload)}" if workload else short(model)


def safe_name(text: str) -> str:
    """A file-name-safe version of ``text`` (pair keys may be paths)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", pair_label(text)).strip("._")[:80] or "pair"


def write_design_yaml(design: Mapping[str, Any], path: str | Path, *, header: str = "") -> None:
    """Write a design dict as ``kind: design`` YAML."""
    data = {"kind": "design", **{k: v for k, v in design.items() if k != "kind"}}
    text = yaml.safe_dump(data, sort_keys=False)
    Path(path).write_text((f"# {header}\n" if header else "") + text, encoding="utf-8")


def _heatmap(design: Any, raw: Any, path: Path, title: str) -> bool:
    util = getattr(raw, "link_util", None)
    if util is None or design is None:
        return False
    from hydra_opt.hardware.noi import plot_link_heatmap
    from hydra_opt.system.materialise import design_mesh

    d = design if not isinstance(design, Mapping) else None
    if d is None:
        return False
    mesh = design_mesh(d)
    import numpy as np

    arr = np.asarray(util, dtype=float)
    if arr.shape != (mesh.n_links,):
        return False
    plot_link_heatmap(mesh, arr, str(path), title=title)
    return True


def _requests_csv(raw: Any, path: Path) -> bool:
    writer = getattr(raw, "write_trace", None)
    if writer is None:
        return False
    tmp = path.with_suffix("")  # .csv
    writer(str(tmp))
    with open(tmp, "rb") as src, gzip.open(path, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    tmp.unlink()
    return True


def upload_trial_artifacts(
    store: Any,
    trial: optuna.Trial,
    design_dict: Mapping[str, Any],
    outcomes: Mapping[str, SimOutcome],
    *,
    design_obj: Any = None,
) -> list[str]:
    """Write and upload a promoted trial's artifacts; returns the artifact ids."""
    ids: list[str] = []
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="hydra_opt_art_") as tmpd:
        tmp = Path(tmpd)
        files: list[tuple[Path, str]] = []
        dpath = tmp / f"trial{trial.number}_design.yaml"
        write_design_yaml(design_dict, dpath, header=f"trial {trial.number} of study {trial.study.study_name}")
        files.append((dpath, "application/yaml"))
        for pair, out in outcomes.items():
            name = safe_name(pair)
            raw = out.raw
            design = design_obj if design_obj is not None else getattr(raw, "design_point", None)
            try:
                if design is None:
                    from hydra_opt.system.design import DesignPoint

                    design = DesignPoint.from_dict(dict(design_dict))
                png = tmp / f"trial{trial.number}_{name}_noi_link_util.png"
                if _heatmap(design, raw, png, f"trial {trial.number}, {pair_label(pair)}: NoI link utilisation"):
                    files.append((png, "image/png"))
            except Exception as exc:  # noqa: BLE001 - artifacts are best effort
                errors.append(f"heatmap {pair}: {type(exc).__name__}: {exc}")
            try:
                gz = tmp / f"trial{trial.number}_{name}_requests.csv.gz"
                if _requests_csv(raw, gz):
                    files.append((gz, "application/gzip"))
            except Exception as exc:  # noqa: BLE001
                errors.append(f"requests {pair}: {type(exc).__name__}: {exc}")
        for path, mime in files:
            try:
                ids.append(
                    optuna.artifacts.upload_artifact(
                        artifact_store=store, file_path=str(path), study_or_trial=trial, mimetype=mime
                    )
                )
            except Exception as exc:  # noqa: BLE001
                errors.append(f"upload {path.name}: {type(exc).__name__}: {exc}")
    if errors:
        trial.set_user_attr("artifact_errors", errors[:10])
    return ids
