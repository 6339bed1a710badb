"""Every dataset x sampler combination composes and runs on small sizes with the delivery check passing."""

from __future__ import annotations

import pytest

from loaderexp.runner import JobContext, run
from tests.conftest import run_cli

SMALL = {
    "cifar10": ["bench=quick"],  # the real 50,000-image copy; a partial epoch keeps it quick
    "synthetic": ["dataset.num_samples=200", "bench=epochs"],
    "imagefolder": ["dataset.count=60", "dataset.width=48", "dataset.height=40", "transform=imagenet_train",
                    "transform.size=32", "bench=epochs"],
    "fakedata": ["dataset.size=60", "dataset.image_size=[3,24,24]", "transform=imagenet_train", "transform.size=16",
                 "bench=epochs"],
    "custom": ["+dataset.num_samples=120", "+dataset.size=16", "bench=epochs"],
    "stream": ["dataset.num_samples=200", "bench=epochs"],
}
SAMPLERS = ["sequential", "random", "random_replacement", "weighted", "subset", "distributed"]


def run_small(compose_cfg, tmp_path, overrides):
    cfg = compose_cfg(["tracking=none", "loader.batch_size=16", "bench.resource_interval_s=0.05", *overrides])
    return run(cfg, JobContext(output_dir=tmp_path / "job"))


def dataset_sampler_cases():
    """Every dataset with every sampler; the fast tier keeps each dataset once (sequential) and each sampler
    once (on synthetic), the rest of the grid is marked slow."""
    for dataset in SMALL:
        for sampler in SAMPLERS:
            fast = dataset == "synthetic" or (sampler == "sequential" and dataset != "cifar10")  # test_cifar has it
            yield pytest.param(dataset, sampler, id=f"{dataset}-{sampler}", marks=() if fast else pytest.mark.slow)


@pytest.mark.parametrize("dataset,sampler", dataset_sampler_cases())
def test_dataset_and_sampler_run_with_delivery_ok(compose_cfg, tmp_path, dataset, sampler):
    result = run_small(compose_cfg, tmp_path, [f"dataset={dataset}", f"sampler={sampler}", *SMALL[dataset]])
    assert result.status == "FINISHED", result.error
    assert result.info.delivery_ok is True, result.info.delivery_problems
    assert result.metrics["throughput_samples_per_s"] > 0
    if dataset == "stream" and sampler != "sequential":
        assert any("ignored: an IterableDataset orders its own samples" in w for w in result.warnings)


def test_distributed_sampler_loads_one_ranks_share(compose_cfg, tmp_path):
    result = run_small(compose_cfg, tmp_path, ["dataset=synthetic", "sampler=distributed", "sampler.num_replicas=4",
                                               *SMALL["synthetic"]])
    assert result.metrics["measured_samples"] == 50  # 200 samples / 4 ranks, one whole epoch


def test_imagefolder_reports_bytes_read_and_is_generated_once(compose_cfg, tmp_path, data_root):
    overrides = ["dataset=imagefolder", *SMALL["imagefolder"]]
    first = run_small(compose_cfg, tmp_path, overrides)
    assert first.info.data_source == "generated"
    assert first.metrics["read_mb_per_s"] > 0
    jpegs = sorted((data_root / "imagefolder").rglob("*.jpg"))
    assert len(jpegs) == 60
    stamp = jpegs[0].stat().st_mtime_ns
    run_small(compose_cfg, tmp_path, overrides)
    assert jpegs[0].stat().st_mtime_ns == stamp  # reused, not regenerated


def test_missing_image_folder_without_generation_names_the_key(compose_cfg, tmp_path):
    result = run_small(compose_cfg, tmp_path, ["dataset=imagefolder", "dataset.generate=false",
                                               f"dataset.root={tmp_path / 'nowhere'}"])
    assert result.status == "FAILED"
    assert f"dataset.root={tmp_path / 'nowhere'}: no image folder there" in result.error


def test_iterable_dataset_shards_across_workers(compose_cfg, tmp_path):
    result = run_small(compose_cfg, tmp_path, ["dataset=stream", "sampler=sequential", "loader.num_workers=2",
                                               *SMALL["stream"]])
    assert result.info.delivery_ok is True
    assert result.metrics["measured_samples"] == 200


def test_iterable_dataset_that_does_not_shard_is_flagged(compose_cfg, tmp_path):
    result = run_small(compose_cfg, tmp_path, ["dataset=stream", "sampler=sequential", "dataset.shard=false",
                                               "loader.num_workers=2", *SMALL["stream"]])
    assert result.status == "FINISHED"
    assert result.info.delivery_ok is False
    assert any("does not shard across workers" in w for w in result.warnings)


@pytest.mark.slow
def test_custom_dataset_example_runs_in_spawned_workers(tmp_path, data_root):
    """The README's custom-dataset example, with workers that must import the class again."""
    proc = run_cli(["dataset=custom", "+dataset.num_samples=64", "+dataset.size=16", "loader.batch_size=16",
                    "loader.num_workers=2", "loader.multiprocessing_context=spawn", "bench=epochs", "tracking=none",
                    "hydra.run.dir=out"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "FINISHED" in proc.stdout and " ok" in proc.stdout


@pytest.mark.parametrize("sampler,workers", [
    pytest.param("sequential", 0, id="sequential-0"), pytest.param("random", 2, id="random-2"),
    pytest.param("sequential", 2, id="sequential-2", marks=pytest.mark.slow),
    pytest.param("random", 0, id="random-0", marks=pytest.mark.slow),
])
def test_prebatched_items_with_batch_size_null(compose_cfg, tmp_path, workers, sampler):
    """batch_size=null: each item is a batch; rates count its samples, delivery checks its items."""
    result = run_small(compose_cfg, tmp_path, ["dataset=synthetic_batches", "dataset.num_samples=1000",
                                               "dataset.batch=64", "loader.batch_size=null", f"sampler={sampler}",
                                               f"loader.num_workers={workers}", "bench=epochs"])
    assert result.status == "FINISHED", result.error
    assert result.info.delivery_ok is True, result.info.delivery_problems
    assert result.info.batches_per_epoch == 16  # 15 items of 64 and one of 40
    # One whole epoch per repeat after the warm-up batches: the samples are the items' own.
    per_repeat = result.metrics["measured_samples"] / result.metrics["repeats"]
    assert per_repeat == 1000 - result.info.warmup_batches * 64


def test_batch_size_null_refuses_drop_last(compose_cfg):
    from loaderexp.config import ConfigError, to_spec, validate

    plain = to_spec(compose_cfg(["loader.batch_size=null", "loader.drop_last=true"]))
    with pytest.raises(ConfigError, match=r"loader.drop_last=true: needs a loader.batch_size"):
        validate(plain, cuda_available=False, cpus=2, targets=False)
