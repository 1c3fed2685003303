"""What a user sees in optuna-dashboard (headless Chromium, rendered DOM) on a study with infeasible, not-promoted,
duplicate and simulated trials (issue 19): objective names, why each trial was not simulated (trial notes), the
study note with the counts by reason, and "Best Trial" badges on exactly the CLI's front — not on a duplicate.

The study is made with the closed-form test evaluator (``tests/dse_fakes.py``); a duplicate of the front's M_T design
is forced by enqueueing its parameters.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import optuna
import pytest
import yaml

from test_dse_dashboard import CHROMIUM_FLAGS, _get, start_dashboard, stop_dashboard

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                                reason="chromium is not installed (run .ci/install_chromium)")


def _cli(*argv: str) -> None:
    from hydra_opt.cli.main import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(list(argv)) == 0


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("browser")
    doc = {
        "kind": "study", "name": "mixed", "model": "llama-3-8b", "workload": "chat", "sampler": "tpe",
        "search_space": {"kind": "search_space", "name": "small", "slots": 24,
                         "chiplets": {"tscs_p": {"min": 1, "max": 21}, "tscs_d": {"min": 1, "max": 21}},
                         "memory": {"count": {"min": 2, "max": 8}},  # n_mem = 2: infeasible (fake evaluator)
                         "d2d_bw_gbps": [256, 512], "max_batch": [4, 8, 16], "placement": "cp",
                         "batching": "static", "scheduler": "static",  # the quickstart's full design dict
                         "package": {"grid_w": 6, "grid_h": 4, "slot_area_mm2": 144}},
        "pruner": {"n_warmup_trials": 4, "epsilon": 0.02}, "budget": {"n_trials": 20},
        "evaluator": "dse_fakes:make", "seed": 3, "artifacts": False,
    }
    f = d / "mixed.yaml"
    f.write_text(yaml.safe_dump(doc))
    url = f"sqlite:///{d / 'mixed.db'}"
    _cli("run", str(f), "--quiet")
    from hydra_opt.dse.report import front_rows

    st = optuna.load_study(study_name="mixed", storage=url)
    _, facts = front_rows(st)
    st.enqueue_trial(next(t for t in st.trials if t.number == facts["mt"]).params)  # a duplicate of M_T
    _cli("run", str(f), "--quiet", "--n-trials", "21")
    st = optuna.load_study(study_name="mixed", storage=url)
    rows, facts = front_rows(st)
    by = {}
    for t in st.trials:
        ua = t.user_attrs
        kind = ("infeasible" if "infeasible" in ua else "duplicate" if "duplicate_of" in ua
                else "dominated" if ua.get("promotion") == "dominated" else "simulated" if t.values else "other")
        by.setdefault(kind, []).append(t.number)
    assert by.get("infeasible") and by.get("duplicate") and by.get("dominated") and by.get("simulated")
    return {"url": url, "front": sorted(r.number for r in rows), "mt": facts["mt"], "by": by, "dir": d}


@pytest.fixture(scope="module")
def dashboard(study: dict):
    proc, base = start_dashboard(study["url"])
    yield base
    stop_dashboard(proc)


def _page_text(url: str, tmp: Path, shot: str | None = None) -> str:
    """The rendered page's visible text (scripts and styles dropped, whitespace collapsed)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    common = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp / 'profile'}"]
    env = {**os.environ, "HOME": str(tmp)}
    dom = subprocess.run([*common, "--dump-dom", url], capture_output=True, text=True, timeout=120, env=env).stdout
    if shot and os.environ.get("HYDRA_OPT_SCREENSHOT_DIR"):  # keep pictures for a human (CI artifact)
        out = Path(os.environ["HYDRA_OPT_SCREENSHOT_DIR"]) / shot
        subprocess.run([*common, f"--screenshot={out}", url], capture_output=True, timeout=120, env=env)
    dom = re.sub(r"<script.*?</script>|<style.*?</style>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom)))


def _best_badges(text: str) -> list[int]:
    """Trial numbers wearing the "Best Trial" badge in the trial list."""
    return sorted(int(n) for n in re.findall(r"Trial (\d+) Complete Best Trial", text))


def test_study_page_names_objectives_and_shows_the_titled_front(study: dict, dashboard: str, tmp_path: Path) -> None:
    text = _page_text(f"{dashboard}/dashboard/studies/1", tmp_path, "dashboard_study.png")
    assert "Objective X: throughput [tok/s]" in text and "Objective Y: TTFT [s]" in text
    assert "mixed: llama-3-8b on chat" in text and "throughput [tok/s] vs TTFT [s]" in text, "hydra_opt's plot"
    best = [int(n) for n in re.findall(r"Trial (\d+) Objective Values", text.split("Best Trials", 1)[1])]
    assert sorted(best) == study["front"], "the dashboard's Best Trials card is the CLI front"


def test_trial_pages_say_why_a_trial_was_not_simulated(study: dict, dashboard: str, tmp_path: Path) -> None:
    by = study["by"]
    page = f"{dashboard}/dashboard/studies/1/trials?numbers="
    text = _page_text(page + str(by["infeasible"][0]), tmp_path, "dashboard_trial_infeasible.png")
    assert "Note Infeasible — the design cannot be built" in text
    assert "memory: model weights need >= 3 memory chiplets" in text
    assert _best_badges(text) == study["front"], "Best Trial badges in the trial list = the CLI front"
    text = _page_text(page + str(by["dominated"][0]), tmp_path)
    assert "Note Not promoted — estimated only, not simulated: estimate dominated" in text
    dup = max(by["duplicate"])  # trial 20, the enqueued copy of M_T
    text = _page_text(page + str(dup), tmp_path, "dashboard_trial_duplicate.png")
    assert f"Note Duplicate — not a front candidate of its own: same design as trial {study['mt']}" in text
    assert f"Trial {dup} Pruned" in text and f"Trial {dup} Complete" not in text


def test_study_note_counts_trials_by_reason(study: dict, dashboard: str, tmp_path: Path) -> None:
    text = _page_text(f"{dashboard}/dashboard/studies/1/note", tmp_path)
    n = len(study["by"]["infeasible"])
    assert "trials by outcome: simulated" in text
    assert f"infeasible {n}: {n} x memory: model weights need >= 3 memory chiplets" in text


#: Longest user-attribute value (characters) that fits the trial panel of a 1400-px window without widening it
#: (the dashboard does not wrap attribute values; measured: the 250-character design JSON pushed it past 2400 px).
MAX_ATTR_CHARS = 120


def test_no_user_attribute_widens_the_trial_panel(study: dict, dashboard: str) -> None:
    detail = _get(f"{dashboard}/api/studies/1")
    long = {(t["number"], a["key"]): len(a["value"]) for t in detail["trials"] for a in t["user_attrs"]
            if len(a["value"]) > MAX_ATTR_CHARS}
    assert not long, f"user attributes too long for the trial panel: {long}"
