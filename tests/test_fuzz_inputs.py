"""Property-based fuzzing of every input reader (issue 17, "fuzzing as a habit").

Each reader gets valid documents with one part replaced by a hostile value (NaN, inf, huge or negative numbers,
control characters, wrong types, deep nesting, aliases, long strings) and raw text. The property, the CLI's
promise: the reader either succeeds or raises :class:`~hydra_opt.config.ConfigError` whose message is one bounded
line (the CLI prints it as ``hydra_opt: error: ...`` and exits 2) — never another exception (a traceback), never a
hang (Hypothesis' per-example deadline), and on error nothing is written (no storage file, no study).

Readers run in-process so that the whole file stays within a few minutes of CI; ``run`` goes through
``hydra_opt.cli.main.main`` with a one-trial budget. Examples are bounded with ``settings(max_examples=...)``; the
fixed corpus of known cases lives in ``tests/fixtures/hostile`` (tests/test_hostile_inputs.py).
"""

from __future__ import annotations

import itertools
import json
import os
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from hydra_opt.cli.main import main
from hydra_opt.config import ConfigError

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(__file__).resolve().parent / "fixtures" / "hostile"
#: ``HYDRA_OPT_FUZZ_SCALE=10`` multiplies every example count (a longer hunt outside CI).
SCALE = max(1, int(os.environ.get("HYDRA_OPT_FUZZ_SCALE", "1")))
FUZZ = settings(max_examples=60 * SCALE, deadline=timedelta(seconds=10), database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_counter = itertools.count()

# -- hostile values -----------------------------------------------------------------------------------------------
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, -1, 1, 2**31, 2**63, 10**4300 // 10**4250, -(2**64)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-300, 1e308, -0.0, 5e-324]),
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "\x1b[31m", "a\nb", "../../etc/passwd", "x" * 5000, "%s%n", "${HOME}",
                     "nan", "inf", "1e309", "-1", "٣", "sqlite:///:memory:"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=5),
                                                       st.dictionaries(st.text(max_size=10), inner, max_size=5)),
                      max_leaves=12)


def _mutate(doc: Any, path: list[Any], value: Any) -> Any:
    """``doc`` with the item at ``path`` (keys/indices, possibly a new key) replaced by ``value``."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(doc, dict):
        out = dict(doc)
        out[head] = _mutate(doc.get(head), rest, value)
        return out
    if isinstance(doc, list) and isinstance(head, int) and doc:
        out = list(doc)
        out[head % len(doc)] = _mutate(doc[head % len(doc)], rest, value)
        return out
    return value


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def mutated(doc: dict, *, keep: tuple[str, ...] = ()) -> st.SearchStrategy[Any]:
    """Documents with one existing item (or one new key) replaced by a hostile value; ``keep`` keys untouched."""
    paths = [p for p in _paths(doc) if p and p[0] not in keep]
    new_key = st.tuples(st.text(max_size=12)).filter(lambda p: p[0] not in keep)
    return st.tuples(st.one_of(st.sampled_from(paths), new_key), VALUES).map(
        lambda pv: _mutate(doc, list(pv[0]), pv[1]))


def _dump(doc: Any) -> str:
    try:
        return yaml.safe_dump(doc, allow_unicode=True)
    except yaml.YAMLError:
        return json.dumps(doc, default=str)  # JSON is YAML


def _one_line(exc: ConfigError) -> None:
    msg = exc.format()
    assert "\n" not in msg and len(msg) < 2000, msg[:300]


def read_ok_or_config_error(fn, *args: Any) -> Any:
    """``fn(*args)``: its value, or None after a one-line ConfigError; any other exception fails the test."""
    try:
        return fn(*args)
    except ConfigError as exc:
        _one_line(exc)
        return None


def _write(tmp: Path, text: str | bytes, suffix: str = ".yaml") -> Path:
    p = tmp / f"f{next(_counter)}{suffix}"
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    return p


TEXT_DOCS = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=200),
    st.builds(lambda n, a: f"a: &a [{'x, ' * 9}x]\n" + "".join(
        f"b{i}: &b{i} [{', '.join(['*' + ('a' if i == 0 else f'b{i - 1}')] * a)}]\n" for i in range(n)),
        st.integers(1, 12), st.integers(1, 12)),
    st.integers(1, 3000).map(lambda n: "x: " + "[" * n + "]" * n),
    st.integers(1, 3000).map(lambda n: "x: " + "{a: " * n + "1" + "}" * n),
)


# -- YAML readers (space, objectives, design, workload, model) ------------------------------------------------------
def _yaml(path: str) -> dict:
    return yaml.safe_load((ROOT / path).read_text())


READERS = {
    "space": ("hydra_opt.dse.search_space", "load_search_space", _yaml("search_spaces/quickstart.yaml")),
    "objectives": ("hydra_opt.evaluate.objectives", "load_objectives", _yaml("objectives/throughput_ttft.yaml")),
    "design": ("hydra_opt.system.design", "load_design",
               _yaml("studies/designs/fig10-nemotron-h-4b-chat-bstar-rr.yaml")),
    "workload": ("hydra_opt.workload.workload", "load_workload", _yaml("studies/workloads/quickstart-chat.yaml")),
    "model": ("hydra_opt.workload.models", "load_model", yaml.safe_load(
        (ROOT / "hydra_opt" / "data" / "models" / "llama-3-8b.yaml").read_text())),
}


def _reader(kind: str):
    import importlib

    mod, fn, _ = READERS[kind]
    return getattr(importlib.import_module(mod), fn)


@pytest.mark.parametrize("kind", sorted(READERS))
@FUZZ
@given(data=st.data())
def test_yaml_readers_succeed_or_give_one_line(kind: str, data: st.DataObject, tmp_path: Path) -> None:
    doc = READERS[kind][2]
    text = data.draw(st.one_of(mutated(doc).map(_dump), TEXT_DOCS), label="document")
    read_ok_or_config_error(_reader(kind), str(_write(tmp_path, text)))


# -- traces ----------------------------------------------------------------------------------------------------------
CELLS = st.one_of(st.integers(-5, 10**6).map(str), st.sampled_from(["", "nan", "inf", "-0", "1e300", "1.5", "٣",
                                                                    "9" * 5000, "x" * 200_000, "\x00", '"', "\n"]),
                  st.text(max_size=12))
HEADERS = {"vidur": "num_prefill_tokens,num_decode_tokens,arrived_at", "azure": "TIMESTAMP,ContextTokens,GeneratedTokens"}
STAMPS = st.one_of(st.datetimes().map(lambda d: d.strftime("%Y-%m-%d %H:%M:%S.%f")), CELLS)


@FUZZ
@given(fmt=st.sampled_from(["vidur", "azure"]), rows=st.lists(st.tuples(CELLS, CELLS, CELLS), max_size=6),
       stamps=st.lists(STAMPS, min_size=6, max_size=6))
def test_csv_traces_succeed_or_give_one_line(fmt: str, rows: list, stamps: list, tmp_path: Path) -> None:
    from hydra_opt.workload.traces import load_trace

    lines = [HEADERS[fmt]]
    for (a, b, c), s in zip(rows, stamps):
        lines.append(",".join([s, a, b] if fmt == "azure" else [a, b, c]))
    read_ok_or_config_error(load_trace, _write(tmp_path, "\n".join(lines) + "\n", ".csv"), "auto")


JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-10, 10**20), st.floats(),
                                     st.text(max_size=8)),
                           lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                   st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=8)


@FUZZ
@given(records=st.lists(st.one_of(
    st.fixed_dictionaries({"timestamp": JSON_VALUES, "input_length": JSON_VALUES, "output_length": JSON_VALUES}),
    JSON_VALUES), max_size=5),
    raw=st.one_of(st.none(), st.text(max_size=80), st.integers(1, 20000).map(lambda n: "[" * n + "]" * n)))
def test_jsonl_traces_succeed_or_give_one_line(records: list, raw: str | None, tmp_path: Path) -> None:
    from hydra_opt.workload.traces import load_trace

    lines = [json.dumps(r, allow_nan=True) for r in records] + ([raw] if raw is not None else [])
    text = "\n".join(lines) + "\n"
    assume(text.strip())
    read_ok_or_config_error(load_trace, _write(tmp_path, text, ".jsonl"), "mooncake")


# -- storage URLs ----------------------------------------------------------------------------------------------------
@FUZZ
@given(scheme=st.sampled_from(["sqlite", "journal", "redis", "postgresql", "mysql+pymysql", "ftp", "", "SQLITE"]),
       rest=st.text(max_size=60))
def test_storage_urls_succeed_or_give_one_line(scheme: str, rest: str, tmp_path: Path) -> None:
    """Any text after a scheme: checked (no other exception); files only under the test's folder; network URLs
    go to a closed port on 127.0.0.1 so that nothing waits on DNS or a remote server."""
    from hydra_opt.dse.storages import StorageOptions, check_url, make_storage

    tmp_path = tmp_path / f"e{next(_counter)}"  # one folder per example (the fixture is shared by all)
    tmp_path.mkdir()
    if scheme in ("sqlite", "journal", "SQLITE"):
        url = f"{scheme}:///{tmp_path}/{rest.replace('/', '_')}"
    elif scheme in ("redis", "postgresql", "mysql+pymysql"):
        url = f"{scheme}://u:{rest.replace('@', '').replace('/', '')}@127.0.0.1:1/db"
    else:
        url = f"{scheme}://{rest}"
    if read_ok_or_config_error(check_url, url) is None:
        assert not list(tmp_path.iterdir())  # refused: nothing created
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        read_ok_or_config_error(make_storage, url, StorageOptions(heartbeat_interval_s=0, retry_s=0))


# -- study YAMLs and CLI values, through the CLI ---------------------------------------------------------------------
VALID = yaml.safe_load((CORPUS / "valid.yaml").read_text())


def _run(tmp: Path, study_text: str, *extra: str, capsys: pytest.CaptureFixture) -> None:
    """``run`` with a one-trial budget on a fresh SQLite file: exit 0, or exit 2 with one line and no file."""
    n = next(_counter)
    study = _write(tmp, study_text)
    db = tmp / f"s{n}.db"
    args = ["run", str(study), "--storage", f"sqlite:///{db}", "--study-name", f"fz{n}", "--quiet", *extra]
    if "--n-trials" not in extra:
        args += ["--n-trials", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            code = main(args)
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
    _out, err = capsys.readouterr()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code in (0, 2), (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    if code == 2:  # one error line (after argparse's usage lines for a usage error)
        assert lines[-1].startswith("hydra_opt: error: "), err[-2000:]
        assert sum(ln.startswith("hydra_opt: error: ") for ln in lines) == 1, err[-2000:]
        assert not db.exists() and not (tmp / "artifacts").exists(), err  # nothing written


@settings(FUZZ, max_examples=50 * SCALE, deadline=timedelta(seconds=30))
@given(text=st.one_of(mutated(VALID, keep=("evaluator", "storage", "budget")).map(_dump), TEXT_DOCS))
def test_study_files_run_or_give_one_line(text: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Study YAMLs (the evaluator stays the closed-form fake: a study file's evaluator is code, not input)."""
    _run(tmp_path, text, capsys=capsys)


CLI_OPTIONS = ["--n-trials", "--timeout", "--seed", "--worker-index", "--heartbeat-interval", "--grace-period",
               "--storage-retry", "--study-name", "--workers"]
CLI_TEXT = st.one_of(st.integers(-(10**25), 10**25).map(str), st.floats().map(repr), st.text(max_size=20),
                     st.sampled_from(["", "0", "-0", "1e309", "nan", "inf", " 3", "0x10", "٣", "3.0", "1_000"]))


def _long_run(option: str, value: str) -> bool:
    """Valid values that would make one example long (many trials or worker processes)."""
    try:
        v = int(value)
    except ValueError:
        return False
    return (option == "--n-trials" and v > 2) or (option == "--workers" and v > 1)


@settings(FUZZ, max_examples=60 * SCALE, deadline=timedelta(seconds=30))
@given(option=st.sampled_from(CLI_OPTIONS), value=CLI_TEXT)
def test_cli_values_run_or_give_one_line(option: str, value: str, tmp_path: Path,
                                         capsys: pytest.CaptureFixture) -> None:
    assume(not _long_run(option, value))
    extra = [option, value] + (["--timeout", "20"] if option != "--timeout" else [])
    _run(tmp_path, (CORPUS / "valid.yaml").read_text(), *extra, capsys=capsys)


def test_a_run_stopped_before_its_first_trial_writes_its_report(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    """``--timeout 5e-164`` (found by the fuzzer above): the run stopped before any trial and the report's trials
    frame had no columns (KeyError 'feasible' in the plots). Now exit 0 and an empty front."""
    study = _write(tmp_path, (CORPUS / "valid.yaml").read_text())
    db = tmp_path / "t.db"
    code = main(["run", str(study), "--storage", f"sqlite:///{db}", "--study-name", "t0", "--quiet",
                 "--timeout", "5e-164", "--n-trials", "1"])
    _out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    assert "Traceback" not in err
