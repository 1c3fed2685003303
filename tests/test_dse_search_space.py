"""Search spaces: counts match the paper's enumerations, sampling never yields an impossible composition, every
composition is reachable, the grid covers the space once, YAML errors are located."""

from __future__ import annotations

import warnings
from pathlib import Path

import optuna
import pytest

from hydra_opt.config import ConfigError, Node
from hydra_opt.dse.search_space import load_search_space, parse_search_space

ROOT = Path(__file__).resolve().parents[1]
SPACES = ROOT / "search_spaces"


def _sample(space, n: int, sampler=None, seed: int = 0) -> list[dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(sampler=sampler or optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        t = study.ask()
        out.append(space.suggest(t))
        study.tell(t, 0.0)
    return out


@pytest.mark.parametrize(
    "file,compositions,designs",
    [
        # METHODS 2a: Llama-3/Mamba-2 210 compositions x 24 = 5,040; Nemotron-H artifact subset 710 x 24 = 17,040.
        ("llama3.yaml", 210, 5040),
        ("mamba2.yaml", 210, 5040),
        ("nemotron_h_artifact.yaml", 710, 17040),
        ("nemotron_h.yaml", 7280, 174720),
    ],
)
def test_space_sizes_match_the_paper_enumerations(file: str, compositions: int, designs: int) -> None:
    space = load_search_space(SPACES / file)
    assert space.composition.count() == compositions
    assert space.size() == designs


def test_counts_agree_with_the_system_layer_enumeration() -> None:
    from hydra_opt.system.space import llama3_space, nemotron_h_space

    assert load_search_space(SPACES / "llama3.yaml").size() == len(llama3_space())
    assert load_search_space(SPACES / "nemotron_h_artifact.yaml").size() == len(nemotron_h_space("artifact"))


def _check_design(space, d: dict) -> None:
    parts = {p.name: p.values for p in space.composition.parts}
    assert sum(d["chiplets"].values()) + d["n_mem"] == space.composition.slots
    assert d["n_mem"] in parts["mem"]
    for name, n in d["chiplets"].items():
        assert n in parts[name], (name, n)


@pytest.mark.parametrize("encoding", ["conditional", "stick_breaking", "enumerated"])
def test_sampling_never_produces_an_impossible_composition(encoding: str) -> None:
    # The artifact subset has parity rules (HBM even, compute odd): the hardest case for conditional sampling.
    space = load_search_space(SPACES / "nemotron_h_artifact.yaml").with_encoding(encoding)
    for d in _sample(space, 150, seed=1):
        _check_design(space, d)


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_model_based_samplers_also_stay_valid(sampler: str) -> None:
    space = load_search_space(SPACES / "nemotron_h.yaml")
    s = optuna.samplers.TPESampler(seed=0, n_startup_trials=5) if sampler == "tpe" else optuna.samplers.NSGAIISampler(
        seed=0, population_size=8)
    if sampler == "nsga2":
        space = space.with_encoding("stick_breaking")
    for d in _sample(space, 40, sampler=s):
        _check_design(space, d)


TINY = {
    "kind": "search_space",
    "name": "tiny",
    "slots": 8,
    "chiplets": {"tscs_p": {"min": 1, "max": 5}, "tscs_d": [1, 2, 4]},
    "memory": {"count": {"min": 2, "max": 4, "step": 2}},
    "d2d_bw_gbps": [256, 512],
    "max_batch": 8,
}


def _tiny(**changes):
    data = {**TINY, **changes}
    return parse_search_space(Node(data, file="tiny.yaml"))


def test_enumeration_is_exact_and_every_composition_is_reachable() -> None:
    space = _tiny()
    # By hand: mem 2 -> (p, d) with p + d = 6, d in {1,2,4}: (5,1), (4,2), (2,4); mem 4 -> p + d = 4: (3,1), (2,2).
    comps = sorted(space.composition.enumerate())
    assert comps == [(2, 2, 4), (2, 4, 2), (2, 5, 1), (4, 2, 2), (4, 3, 1)]
    assert space.size() == 5 * 2 == len(list(space.enumerate()))
    for encoding in ("conditional", "stick_breaking"):
        seen = {(d["n_mem"], d["chiplets"]["tscs_p"], d["chiplets"]["tscs_d"])
                for d in _sample(space.with_encoding(encoding), 200, seed=2)}
        # Parts are in file order: mem, tscs_p, tscs_d.
        assert seen == set(comps), encoding


def test_grid_sampler_covers_the_space_once() -> None:
    space = _tiny().with_encoding("enumerated")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        study = optuna.create_study(sampler=optuna.samplers.GridSampler(space.grid(), seed=0))
    designs = []

    def objective(t: optuna.Trial) -> float:
        designs.append(space.suggest(t))
        return 0.0

    study.optimize(objective)  # the grid sampler stops the study when exhausted
    keys = sorted(repr(sorted(d.items())) for d in designs)
    assert len(keys) == space.size() and len(set(keys)) == space.size()


def test_design_dicts_are_valid_design_points() -> None:
    from hydra_opt.system.design import DesignPoint

    for file in sorted(SPACES.glob("*.yaml")):
        space = load_search_space(file)
        for d in _sample(space, 5, seed=3):
            dp = DesignPoint.from_dict(d)
            assert dp.n_mem == d["n_mem"] and dict(dp.counts) == {k: v for k, v in d["chiplets"].items() if v}


def test_policy_and_dynacore_dimensions() -> None:
    space = load_search_space(SPACES / "llama3_dynacore.yaml")
    params = set(space.parameter_names())
    assert {"dc_meu", "dc_prefill_precision", "dc_decode_precision"} <= params
    seen = set()
    for d in _sample(space, 30, seed=4):
        dyn = d["dynacore"]
        assert dyn["core_size"] == 32
        assert (dyn["meu_policy"] == "fixed") == ("meu_shape" in dyn)
        if "meu_shape" in dyn:
            assert dyn["meu_shape"] in ([32, 32, 1], [16, 64, 1], [8, 128, 1])
        seen.add(dyn["meu_policy"])
    assert seen == {"adaptive", "fixed"}
    space = load_search_space(SPACES / "nemotron_h_policies.yaml")
    assert space.size() == 174720 * 3 * 3 * 4  # placement x batching (static, continuous, chunked) x scheduler


@pytest.mark.parametrize(
    "changes,key,fragment",
    [
        ({"bogus": 1}, "bogus", "not a known key"),
        ({"slots": 100}, "slots", "no composition"),
        ({"chiplets": {"tscs_p": {"min": 5, "max": 2}}}, "chiplets.tscs_p.max", "smaller than min"),
        ({"placement": ["cp", "spiral"]}, "placement[1]", "is not one of"),
        ({"max_batch": 0}, "max_batch", ">= 1"),
        ({"d2d_bw_gbps": [256, float("nan")]}, "d2d_bw_gbps[1]", "finite"),
        ({"memory": {"count": {"min": 2, "max": 4, "stride": 2}}}, "memory.count.stride", "not a known key"),
        ({"chiplets": {}}, "chiplets", "at least one"),
        ({"kind": "study"}, "kind", "search_space"),
        ({"d2d_bw_gbps": [256, 256]}, "d2d_bw_gbps", "duplicate"),
    ],
)
def test_yaml_errors_are_located(changes: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        _tiny(**changes)
    err = info.value
    assert err.file == "tiny.yaml"
    assert err.key == key, err.format()
    assert fragment in err.format()


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.yaml"
    p.write_text("")
    with pytest.raises(ConfigError, match="empty.yaml"):
        load_search_space(p)


# -- DynaCore MEU shapes must be reachable on the core (the shipped llama3_dynacore space once listed 32x32x32) --
@pytest.mark.parametrize(
    "dyn,key,fragment",
    [
        ({"meu": ["adaptive", [32, 32, 32]]}, "dynacore.meu[1]", "[32, 32, 32] is not a reachable (m, n, t) shape of a 32x32"),
        ({"meu": [[16, 64, 1], [8, 128, 32]]}, "dynacore.meu[1]", "8, 128, 32"),
        ({"meu": ["adaptive", "fixed"]}, "dynacore.meu[1]", "allowed: adaptive or [32, 32, 1]"),
        ({"core_size": 16, "meu": [[32, 32, 1]]}, "dynacore.meu[0]", "16x16"),
        ({"core_size": [16, 32], "meu": [[32, 32, 1]]}, "dynacore.meu[0]", "16x16"),  # must fit every size
        ({"meu_shape": [[8, 8, 8]]}, "dynacore.meu_shape[0]", "m*n*t = 1024"),
        ({"core_size": 24, "meu": [[24, 24, 1]]}, "dynacore.core_size", "power of two"),
    ],
)
def test_unreachable_meu_shapes_are_rejected(dyn: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        _tiny(dynacore=dyn)
    err = info.value
    assert err.file == "tiny.yaml" and err.key == key, err.format()
    assert fragment in err.format()


def test_reachable_meu_shapes_are_accepted_and_shipped_spaces_list_only_reachable_ones() -> None:
    from hydra_opt.hardware.dynacore.core import MEU, reachable_meus

    space = _tiny(dynacore={"core_size": 16, "meu": ["adaptive", [16, 16, 1], [8, 16, 2], [1, 32, 8]]})
    assert space.size() == 10 * 4
    assert _tiny(dynacore={"core_size": [16, 32], "meu": "adaptive"}).size() == 10 * 2
    for file in sorted(SPACES.glob("*.yaml")):
        space = load_search_space(file)  # would raise for an unreachable shape
        dims = {d.name: d.values for d in space.scalars}
        for v in dims.get("dynacore.meu", ()):
            for size in dims.get("dynacore.core_size", (32,)):
                assert v == "adaptive" or MEU(*v) in reachable_meus(size), (file.name, v)


def test_unreachable_shape_exits_2_naming_file_key_and_allowed_shapes(tmp_path: Path, capsys) -> None:
    from hydra_opt.cli.main import main

    text = (SPACES / "llama3_dynacore.yaml").read_text().replace("[32, 32, 1]", "[32, 32, 32]")
    bad = tmp_path / "bad_dynacore.yaml"
    bad.write_text(text)
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad_dynacore.yaml: dynacore.meu[1]: [32, 32, 32] is not a reachable" in err[0]
    assert "allowed: adaptive or [32, 32, 1], [16, 64, 1]" in err[0] and "[1, 32, 32]" in err[0]


@pytest.mark.parametrize("encoding", ["conditional", "stick_breaking", "enumerated"])
@pytest.mark.parametrize("name", ["quickstart.yaml", "llama3_dynacore.yaml", "mamba2.yaml"])
def test_enumerate_params_inverts_suggest(name: str, encoding: str) -> None:
    """``enumerate_params`` gives, for every design, parameters under which ``suggest`` draws exactly that design
    (what the calibrated plan enqueues for a design no trial has proposed)."""
    space = load_search_space(str(SPACES / name)).with_encoding(encoding)
    pairs = list(space.enumerate_params())
    assert [d for d, _ in pairs] == list(space.enumerate())
    step = max(1, len(pairs) // 150)  # a spread sample keeps the big spaces fast
    for design, params in pairs[::step]:
        assert space.suggest(optuna.trial.FixedTrial(params)) == design
        assert set(params) <= set(space.parameter_names())
