"""Training steps: a torchvision model's, the user's own, and what the report makes of them."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from loaderexp.harness.steps import Consumer, ModelStep, images_and_labels, sleep_step
from loaderexp.harness.transfer import HostToDevice
from loaderexp.report import recommend, summary_table
from loaderexp.result import RunResult
from loaderexp.runner import JobContext, run
from tests.conftest import TINY

MODEL_STEP = {"model": "resnet18", "num_classes": 10, "lr": 0.01}


def test_model_step_trains_the_model_on_the_batch():
    torch.manual_seed(0)
    step = ModelStep(torch.device("cpu"), **MODEL_STEP)
    before = [p.detach().clone() for p in step.model.parameters()]
    images, labels = torch.rand(8, 3, 32, 32), torch.arange(8)
    losses = [float(step((images, labels))) for _ in range(5)]
    assert any(not torch.equal(b, p) for b, p in zip(before, step.model.parameters()))
    assert losses[-1] < losses[0]  # it learns this batch: the step really is forward, backward, update


def test_the_consumer_reads_what_a_step_takes_from_the_cpu_on_every_thread():
    """A step on the CPU takes the cores the workers load on (torch's intra-op threads, each core): its CPU per
    batch is the main process's, every thread's; a step the host only waits for (``sleep``) takes none."""
    def burn(ms: float):
        def step(batch):
            end = time.thread_time() + ms / 1000
            while time.thread_time() < end:
                pass
        return step

    def on_two_threads(batch):  # what an intra-op parallel step does: the work of two cores at once
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(burn(20), [batch, batch]))

    times = {}
    for name, step in {"burn": burn(20), "two threads": on_two_threads, "sleep": sleep_step(torch.device("cpu"), 20)}.items():
        consumer = Consumer(HostToDevice(torch.device("cpu")), step)
        consumer(torch.zeros(4), measured=False)  # left out, as a warm-up batch is
        for _ in range(3):
            consumer(torch.zeros(4), measured=True)
        times[name] = consumer.times()
    assert 0.055 <= times["burn"].step_cpu_s <= 0.075 and times["burn"].step_s >= 0.055
    assert 0.11 <= times["two threads"].step_cpu_s <= 0.15  # both threads' CPU: twice its wall on two cores
    assert times["sleep"].step_cpu_s < 0.01 and times["sleep"].step_s >= 0.055


def test_images_and_labels_from_a_batch_as_datasets_make_it():
    images, labels = images_and_labels({"image": torch.full((2, 3, 8, 8), 255, dtype=torch.uint8), "epoch": torch.tensor(3),
                                        "label": torch.tensor([4, 11])}, num_classes=10)
    assert images.dtype == torch.float32 and float(images.max()) == 1.0  # uint8 scaled to [0, 1]
    assert labels.tolist() == [4, 9]  # clamped into the model's classes
    with pytest.raises(ValueError, match="needs a batch of images"):
        images_and_labels((torch.rand(4, 10), torch.tensor([0, 1, 2, 3])), 10)


@pytest.mark.parametrize("step", [pytest.param(["step=model", "step.model=resnet18"], marks=pytest.mark.slow),
                                  ["step=custom"]])
def test_a_sweep_job_with_a_training_step_says_what_bounds_it(compose_cfg, tmp_path, step):
    cfg = compose_cfg([*TINY, "tracking=none", *step])
    result = run(cfg, JobContext(output_dir=tmp_path / "job"))
    assert result.status == "FINISHED", result.error
    assert result.info.bound in ("loader-bound", "compute-bound")
    assert 0 <= result.metrics["stall_fraction"] <= 1 and result.metrics["step_ms_mean"] > 0
    table = summary_table([(tmp_path / "job", result)])
    assert "bound" in table.splitlines()[0]


@pytest.mark.slow
def test_bad_steps_are_named_with_the_valid_choices(compose_cfg, tmp_path):
    result = run(compose_cfg([*TINY, "tracking=none", "step=model", "step.model=resnet19"]),
                 JobContext(output_dir=tmp_path / "a"))
    assert result.status == "FAILED"
    assert result.error.startswith("step.model=resnet19: not a torchvision classification model; valid: ")
    assert "resnet18" in result.error
    result = run(compose_cfg([*TINY, "tracking=none", "step=custom", "step._target_=null"]),
                 JobContext(output_dir=tmp_path / "b"))
    assert result.status == "FAILED" and result.error.startswith("step._target_ is missing")


def fake(workers: int, rate: float, bound: str, stall: float) -> RunResult:
    return RunResult("FINISHED", {"loader.num_workers": workers, "step.kind": "model"},
                     {"throughput_samples_per_s": rate, "throughput_iqr_rel": 0.01, "stall_fraction": stall},
                     info={"delivery_ok": True, "bound": bound})


def test_a_compute_bound_training_gets_the_fewest_workers_and_is_told_so():
    runs = [fake(0, 300, "loader-bound", 0.6), fake(1, 590, "compute-bound", 0.05), fake(2, 600, "compute-bound", 0.01),
            fake(4, 601, "compute-bound", 0.01)]
    rec = recommend(runs)
    assert rec.result.params["loader.num_workers"] == 1
    assert "compute-bound, 5% of its time waiting for data" in rec.text
    assert "more workers would not train faster; num_workers=1 is enough for this training" in rec.text


def test_a_loader_bound_training_is_told_that_faster_loading_would_pay():
    rec = recommend([fake(0, 300, "loader-bound", 0.6), fake(2, 500, "loader-bound", 0.3)])
    assert rec.result.params["loader.num_workers"] == 2
    assert "Even the fastest run is loader-bound, 30% of its time waiting for data" in rec.text
