"""hydra/sweeper=search: the space in override syntax, pruning, resume, every trial a child run."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from loaderexp.search.space import ChoiceDimension, IntDimension, SpaceError, parse_space
from tests.conftest import TINY, run_cli


def test_the_space_reads_hydra_sweep_syntax():
    space = parse_space(["loader.num_workers=int(0,32)", "loader.batch_size=choice(64,128,256)",
                         "loader.pin_memory=true,false", "loader.prefetch_factor=range(2,9,2)", "dataset=cifar10"])
    assert space.dimensions["loader.num_workers"] == IntDimension(0, 32)  # int(a,b): the range, both ends in
    assert space.dimensions["loader.batch_size"] == ChoiceDimension((64, 128, 256))
    assert space.dimensions["loader.pin_memory"] == ChoiceDimension((True, False))
    assert space.dimensions["loader.prefetch_factor"].values == [2, 4, 6, 8]  # range's end excluded
    assert space.fixed == ["dataset=cifar10"]
    assert space.size() == 33 * 3 * 2 * 4
    assert parse_space(["loader.num_workers=int(interval(0,4))"]).dimensions["loader.num_workers"] == IntDimension(0, 4)


@pytest.mark.parametrize("argument,message", [
    ("loader.num_workers=int(5,2)", "loader.num_workers=int(5,2): an empty range"),
    ("loader.num_workers=range(3,3)", "loader.num_workers=range(3,3): an empty range"),
])
def test_an_empty_range_is_refused(argument, message):
    with pytest.raises(SpaceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_space([argument])


def test_each_sampler_and_dimension_is_optunas_own():
    import optuna
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    from hydra_plugins.loaderexp_search.search_sweeper import SearchSweeperConf
    from loaderexp.result import TOLERANCE
    from loaderexp.search.space import FloatDimension
    from loaderexp.search.study import distribution, make_sampler

    assert isinstance(make_sampler("tpe", 0), optuna.samplers.TPESampler)
    assert isinstance(make_sampler("random", 0), optuna.samplers.RandomSampler)
    with pytest.raises(SpaceError, match="hydra.sweeper.sampler=annealing: valid samplers: tpe, gp, random"):
        make_sampler("annealing", 0)
    assert distribution(IntDimension(0, 8, 2)) == IntDistribution(0, 8, step=2)
    assert distribution(FloatDimension(0.5, 4.0, log=True)) == FloatDistribution(0.5, 4.0, log=True)
    assert distribution(ChoiceDimension((64, 128))) == CategoricalDistribution([64, 128])
    assert SearchSweeperConf().tolerance == TOLERANCE  # the search's rule is the recommendation's


def test_the_local_probe_steps_to_the_grid_neighbours_and_one_fewer_worker():
    from loaderexp.search.sweeper import Search

    space = parse_space(["loader.num_workers=int(0,8)", "loader.batch_size=choice(64,128,256)"])
    here = {"loader.num_workers": 4, "loader.batch_size": 128}
    assert Search._neighbours(here, space) == [{"loader.num_workers": 4, "loader.batch_size": 64},
                                               {"loader.num_workers": 4, "loader.batch_size": 256}]
    assert Search._fewer_workers(here, space) == {"loader.num_workers": 3, "loader.batch_size": 128}
    assert Search._fewer_workers({"loader.num_workers": 0, "loader.batch_size": 64}, space) is None


@pytest.mark.slow
@pytest.mark.parametrize("arguments,message", [
    (["loader.num_wrkers=int(0,4)"], "loader.num_wrkers: no such setting; valid keys: loader.batch_size"),
    (["loader.num_workers=int(4,0)"], "loader.num_workers=int(4,0): an empty range"),
    (["loader.num_workers=0", "loader.prefetch_factor=choice(2,4,8)"],
     "loader.prefetch_factor is searched but loader.num_workers can only be 0"),
])
def test_a_bad_space_is_one_line_before_any_trial(tmp_path, data_root, arguments, message):
    proc = run_cli(["-m", "hydra/sweeper=search", *TINY, "tracking=none", *arguments,
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not list((tmp_path / "sweep").glob("*/result.json"))


def search(tmp_path, store, *extra, sweep="sweep"):
    return run_cli(["-m", "hydra/sweeper=search", *TINY, "bench.repeats=null", "bench.min_repeats=2",
                    "bench.max_repeats=3", "loader.num_workers=int(0,3)", "loader.pin_memory=true,false",
                    f"tracking.uri={store}", "tracking.experiment=search", f"hydra.sweep.dir={tmp_path / sweep}",
                    "hydra.sweeper.seed=1", *extra], cwd=tmp_path)


@pytest.mark.slow
def test_trials_are_children_of_the_sweep_and_resume_continues_the_study(tmp_path, data_root):
    import optuna

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = search(tmp_path, store, "hydra.sweeper.max_trials=3")
    assert first.returncode == 0, first.stderr[-3000:]
    assert "3 trials (at most 3) recorded" in first.stdout and "Recommendation: " in first.stdout
    again = search(tmp_path, store, "hydra.sweeper.max_trials=5", "resume=true")
    assert again.returncode == 0, again.stderr[-3000:]
    study = optuna.load_study(study_name="loaderexp", storage=f"sqlite:///{tmp_path / 'sweep' / 'search.db'}")
    launched = sorted(t.user_attrs["job"] for t in study.trials if "job" in t.user_attrs)
    assert launched == [0, 1, 2, 3, 4]  # two more, numbered on from the first three
    assert sorted(int(p.parent.name) for p in (tmp_path / "sweep").glob("*/result.json")) == launched
    summary = json.loads((tmp_path / "sweep" / "search.json").read_text())
    assert summary["launched"] == 5 and summary["stopped"] == "max_trials"
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("search").experiment_id])
    parents = [r for r in runs if r.data.tags.get("loaderexp.sweep") == "parent"]
    assert len(parents) == 1  # resumed into the same parent
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) == 5
    assert all(r.info.run_name.startswith("workers=") for r in children)


@pytest.mark.slow
def test_a_trial_far_behind_the_best_is_pruned_after_its_first_window(tmp_path, data_root):
    """A floor no run can reach: every trial after the first stops after one window, is told to the
    study as pruned, shows as PRUNED and is never the recommendation."""
    import optuna

    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = search(tmp_path, store, "hydra.sweeper.max_trials=3", "hydra.sweeper.prune_margin=-1000000")
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(p.read_text()) for p in sorted((tmp_path / "sweep").glob("*/result.json"))]
    first, later = results[0], results[1:]
    assert "pruned" not in first["metrics"] and first["metrics"]["repeats"] >= 2
    for result in later:
        assert result["metrics"]["pruned"] == 1.0 and result["metrics"]["repeats"] == 1
        assert result["info"]["repeats_stopped"] == "pruned" and len(result["info"]["repeat_rates"]) == 1
    study = optuna.load_study(study_name="loaderexp", storage=f"sqlite:///{tmp_path / 'sweep' / 'search.db'}")
    states = [t.state.name for t in study.trials if "job" in t.user_attrs]
    assert states == ["COMPLETE", "PRUNED", "PRUNED"]
    pruned = [t for t in study.trials if t.state.name == "PRUNED"]
    assert all(t.intermediate_values for t in pruned)  # each window's rate, reported as it came
    assert proc.stdout.count("PRUNED") >= 2 and "Recommendation: " in proc.stdout
    client = MlflowClient(store)
    runs = client.search_runs([client.get_experiment_by_name("search").experiment_id], "tags.`loaderexp.pruned` = 'true'")
    assert len(runs) == 2 and all("PRUNED" in r.data.tags["mlflow.note.content"] for r in runs)
