"""Hostile input: every case of the corpus in ``tests/fixtures/hostile/`` (malformed study YAMLs, workloads,
traces, storage URLs, paths with traversal, NaN/inf, huge numbers, wrong encodings, empty files, bad CLI values)
makes ``python -m hydra_opt.run`` exit with code 2 and one line naming the file and key, creates no study (no
storage file, no study on the shared PostgreSQL server) and never prints the storage password.

Each case runs in-process (``hydra_opt.cli.main.main``) on a copy of the corpus, so relative storage/artifact paths
would land in the copy, where the test looks for them.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import optuna
import pytest
import yaml
from dist_fakes import PG_URL, server_reachable, unique_name

from hydra_opt.cli.main import main

CORPUS = Path(__file__).resolve().parent / "fixtures" / "hostile"
MANIFEST = yaml.safe_load((CORPUS / "MANIFEST.yaml").read_text())
SECRET: str = MANIFEST["secret"]
CASES: dict[str, dict] = MANIFEST["cases"]


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 40


@pytest.fixture(scope="module")
def pg_with_password() -> str | None:
    """PostgreSQL URL carrying a password (the server trusts local users, so it connects) or None."""
    if server_reachable(PG_URL):
        return None
    return PG_URL.replace("postgres@", f"postgres:{SECRET}@")


@pytest.fixture(scope="module")
def pg_names(pg_with_password: str | None):
    """A function listing the study names on the PostgreSQL server (one storage object for all cases)."""
    if pg_with_password is None:
        return None
    from hydra_opt.dse.storages import StorageOptions, make_storage

    storage = make_storage(PG_URL, StorageOptions(heartbeat_interval_s=0))
    return lambda: optuna.study.get_all_study_names(storage)


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_input_exits_2_with_one_located_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture,
                                                       pg_with_password: str | None, pg_names) -> None:
    spec = CASES[case]
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS, work)
    before = _files(work)
    args = [str(work / spec["study"]), *spec["args"]]
    name = unique_name("t7hostile")
    study_file = work / spec["study"]
    if "--storage" not in spec["args"] and not (study_file.is_file() and b"storage:" in study_file.read_bytes()):
        # A valid storage with a password: an input error must stop the run before anything is created in it.
        args += ["--storage", pg_with_password or f"sqlite:///{tmp_path / 'never.db'}"]
    if "--study-name" not in spec["args"]:
        args += ["--study-name", name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = main(["run", *args])
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hydra_opt: error: "), err
    for fragment in spec["expect"]:
        assert fragment in lines[0], (fragment, lines[0])
    assert SECRET not in out + err
    assert "Traceback" not in out + err
    assert _files(work) == before, "the run created files (storage, artifacts) despite the input error"
    assert not (tmp_path / "never.db").exists()
    if pg_names is not None:
        assert name not in pg_names()


@pytest.mark.db
def test_password_is_redacted_in_progress_summary_and_dashboard_command(tmp_path: Path, capsys) -> None:
    """A successful run on a password URL prints the URL only as ``user:***@``."""
    if server_reachable(PG_URL):
        pytest.skip(server_reachable(PG_URL))
    url = PG_URL.replace("postgres@", f"postgres:{SECRET}@")
    name = unique_name("t7redact")
    study = tmp_path / "valid.yaml"
    shutil.copy(CORPUS / "valid.yaml", study)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            code = main(["run", str(study), "--storage", url, "--study-name", name])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert SECRET not in out + err
        assert "postgres:***@127.0.0.1" in out  # the progress header and the dashboard command
        assert "optuna-dashboard 'postgresql+psycopg2://postgres:***@" in out or \
            "optuna-dashboard postgresql+psycopg2://postgres:***@" in out
    finally:
        from dist_fakes import delete_study

        delete_study(PG_URL, name)


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--older-than", "nan"], "--older-than"),
        (["--older-than", "-5"], "--older-than"),
        (["--max-retry", "1.5"], "--max-retry"),
        (["--storage-is-missing"], "--storage"),
        (["--study-name", "x\ny"], "--study-name"),
        (["--storage", f"ftp://u:{SECRET}@h/x"], "--storage"),
        (["--storage", "sqlite:///{tmp}/absent.db"], "does not exist"),
        (["--storage", "journal:///{tmp}/absent.log"], "does not exist"),
    ],
)
def test_recover_refuses_bad_arguments_without_creating_storage(args: list[str], fragment: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    if "--storage-is-missing" in args:
        args = []
    elif "--storage" not in args:
        args += ["--storage", f"journal:///{tmp_path / 'absent.log'}"]
    try:
        code = main(["recover", *args])
    except SystemExit as exc:  # argparse usage errors exit from the parser
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert fragment in err.strip().splitlines()[-1] and SECRET not in out + err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text,secret_pieces",
    [
        ("postgresql://u:p@ss@host:5432/db", ["p@ss", "ss@"]),  # unencoded '@' in a password
        ("redis://:tok@en@cache:6379/0", ["tok@en", "en@"]),
        ("see postgresql://u:pw1@h/db and mysql+pymysql://r:pw2@h2/d", ["pw1", "pw2"]),
        ("postgresql://h/db?user=u&password=pw3&sslmode=require", ["pw3"]),
    ],
)
def test_redaction_hides_whole_passwords(text: str, secret_pieces: list[str]) -> None:
    from hydra_opt.dse.storages import redact_url, scrub_secret

    shown = redact_url(text)
    assert "***" in shown and not any(p in shown for p in secret_pieces)
    # A driver message echoing the host parsed out of such a URL is scrubbed too.
    echoed = scrub_secret('could not translate host name "ssw0rd@host"', "postgresql://u:pa@ssw0rd@host/db")
    assert "ssw0rd" not in echoed and "host" in echoed


def test_rdb_urls_without_driver_use_an_installed_one() -> None:
    from hydra_opt.dse.storages import with_driver

    assert with_driver("postgresql://u@h/db") == "postgresql+psycopg2://u@h/db"  # psycopg2-binary: the test extra
    assert with_driver("postgres://u@h/db") == "postgresql+psycopg2://u@h/db"
    assert with_driver("mysql://root@h/db") == "mysql+pymysql://root@h/db"
    assert with_driver("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"  # explicit driver kept
    assert with_driver("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"


@pytest.mark.parametrize("name", ["../../escape", "a/../../b", "..", "/etc/cron.d/x"])
def test_study_name_cannot_move_the_artifact_folder(name: str, tmp_path: Path) -> None:
    from hydra_opt.dse.spec import load_study_spec

    doc = yaml.safe_load((CORPUS / "valid.yaml").read_text())
    doc.pop("artifacts")  # default folder: artifacts/<name> next to the study
    doc["name"] = name
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    spec = load_study_spec(path)
    assert spec.artifact_dir is not None
    assert spec.artifact_dir.resolve().parent == (tmp_path / "artifacts").resolve()


#: Issue 17 D7/D8: the other commands' cases (simulate, estimate, report); ``{C}`` is the corpus copy, ``{T}`` the
#: test's folder; each must exit 2 with one located line, write nothing and never print a traceback.
COMMANDS: dict[str, tuple[list[str], list[str]]] = {
    "simulate_seed_negative": (["simulate", "--design", "{C}/designs/ok.yaml", "--model", "nemotron-h-4b",
                                "--workload", "chat", "--requests", "4", "--seed", "-1"], ["--seed"]),
    "simulate_chiplets_1000": (["simulate", "--design", "{C}/designs/chiplets_1000.yaml", "--model", "nemotron-h-4b",
                                "--workload", "chat", "--requests", "4"], ["chiplets_1000.yaml", "chiplets"]),
    "simulate_zero_hbm": (["simulate", "--design", "{C}/designs/zero_hbm.yaml", "--model", "nemotron-h-4b",
                           "--workload", "chat", "--requests", "4"], ["zero_hbm.yaml", "n_mem"]),
    "estimate_zero_hbm": (["estimate", "--design", "{C}/designs/zero_hbm.yaml", "--model", "nemotron-h-4b",
                           "--workload", "chat"], ["zero_hbm.yaml", "n_mem"]),
    "estimate_bw_tiny": (["estimate", "--design", "{C}/designs/bw_tiny.yaml", "--model", "nemotron-h-4b",
                          "--workload", "chat"], ["bw_tiny.yaml", "d2d_bw_gbps", "GB/s"]),
    "simulate_trace_out_missing_folder": (["simulate", "--design", "{C}/designs/ok.yaml", "--model", "nemotron-h-4b",
                                           "--workload", "chat", "--requests", "4", "--trace-out",
                                           "{T}/no/such/folder/t.csv"], ["--trace-out", "does not exist"]),
    "report_out_dev_null": (["report", "--storage", "sqlite:///{T}/r.db", "--study-name", "r", "--out", "/dev/null"],
                            ["--out", "not a folder"]),
    "report_out_under_a_file": (["report", "--storage", "sqlite:///{T}/r.db", "--study-name", "r", "--out",
                                 "{C}/MANIFEST.yaml/sub"], ["--out", "not a folder"]),
}


@pytest.mark.parametrize("case", sorted(COMMANDS))
def test_other_commands_refuse_hostile_input_with_one_line(case: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture) -> None:
    work = tmp_path / "corpus"
    shutil.copytree(CORPUS, work)
    out_dir = tmp_path / "t"
    out_dir.mkdir()
    optuna.create_study(storage=f"sqlite:///{out_dir / 'r.db'}", study_name="r")  # what `report` reads
    before = _files(tmp_path)
    argv, fragments = COMMANDS[case]
    argv = [a.replace("{C}", str(work)).replace("{T}", str(out_dir)) for a in argv]
    code = main(argv)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("hydra_opt: error: "), (out, err)
    assert all(f in lines[0] for f in fragments), lines[0]
    sqlite_side = {f for f in _files(tmp_path) if f.endswith(("-wal", "-shm"))}  # opened to read, not written
    assert _files(tmp_path) - sqlite_side == before  # nothing written


@pytest.mark.parametrize("key", [" \x85", "a\u2028b", "c\u2029d", "e\x9b31mf", "g\x1bh", "tab\there"])
def test_a_key_with_a_line_break_or_terminal_control_stays_on_one_line(key: str) -> None:
    """Regression (Hypothesis found ``' \\x85'`` in a study file): U+0085 NEL, U+2028/2029 and C1 controls are
    line breaks (``str.splitlines``) or terminal escapes too, not only the ASCII controls."""
    from hydra_opt.config.errors import ConfigError
    from hydra_opt.config.reader import Node

    node = Node({"kind": "study", key: 1}, file="s.yaml")
    node.get("kind")
    with pytest.raises(ConfigError) as exc:
        node.done()
    line = f"hydra_opt: error: {exc.value.format()}"
    assert len(line.splitlines()) == 1 and line.isprintable(), repr(line)
    assert "is not a known key" in line
