"""``python -m hydra_opt list``: every shipped model/workload/profile is printed with its size and source."""

from __future__ import annotations

import pytest

from hydra_opt.cli.main import main
from hydra_opt.workload.models import list_models, load_model
from hydra_opt.workload.profiles import list_profiles
from hydra_opt.workload.workload import list_workloads


def test_list_models(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "models"]) == 0
    out = capsys.readouterr().out
    for name in list_models():
        line = next(x for x in out.splitlines() if x.startswith(name + " "))
        assert f"{load_model(name).param_count / 1e9:.3f} B" in line  # with its unit
    assert "@hydra" in out


@pytest.mark.parametrize(("what", "names"), [("workloads", list_workloads), ("profiles", list_profiles)])
def test_list_workloads_and_profiles(capsys: pytest.CaptureFixture[str], what: str, names) -> None:
    assert main(["list", what]) == 0
    out = capsys.readouterr().out
    for name in names():
        assert name in out
    assert "@" in out  # sources are owner/repo:path@commit


def test_list_rejects_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        main(["list", "gpus"])
    assert ei.value.code == 2
