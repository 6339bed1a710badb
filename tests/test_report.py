"""The report: table contents, the recommendation rule, the plot, and reading a sweep back from MLflow."""

from __future__ import annotations

from pathlib import Path

from loaderexp.report import recommend, summary_table, write_report
from loaderexp.result import HostFacts, RunResult


def result(workers: int, rate: float, iqr: float = 0.02, pin: bool = True, status: str = "FINISHED",
           delivery: bool = True) -> RunResult:
    return RunResult(
        status=status,
        params={"loader.num_workers": workers, "loader.pin_memory": pin, "dataset.name": "cifar10"},
        metrics={} if status != "FINISHED" else {
            "throughput_samples_per_s": rate, "throughput_iqr_rel": iqr, "throughput_mb_per_s": rate * 0.012,
            "time_to_first_batch_s": 0.1 * (workers + 1), "epoch_time_s": 50_000 / rate, "wait_p50_ms": 1.0,
            "wait_p95_ms": 2.0, "pss_peak_mb": 1000 + 100 * workers, "h2d_measured": 0.0, "repeats": 3.0,
            "noisy": float(iqr > 0.1),
        },
        info={"delivery_ok": delivery, "h2d": "CUDA not available: host-to-device copy not measured"},
        error=None if status == "FINISHED" else "RuntimeError: boom",
    )


def test_recommends_the_fewest_workers_within_tolerance():
    runs = [result(0, 1000), result(2, 2900), result(4, 3000), result(8, 3050)]
    rec = recommend(runs, tolerance=0.05)
    assert rec.result.params["loader.num_workers"] == 2  # 2900 >= 0.95 * 3050
    assert rec.best.params["loader.num_workers"] == 8
    assert "num_workers=2" in rec.text and "4.9% below the fastest" in rec.text
    assert not rec.within_noise


def test_says_when_the_difference_is_inside_the_noise():
    runs = [result(0, 1000), result(2, 2950, iqr=0.08), result(6, 3000, iqr=0.08)]
    rec = recommend(runs)
    assert rec.result.params["loader.num_workers"] == 2
    assert rec.within_noise
    assert "inside the measured noise" in rec.text


def test_fastest_is_recommended_when_nothing_close_has_fewer_workers():
    rec = recommend([result(0, 1000), result(4, 3000), result(2, 2000)])
    assert rec.result.params["loader.num_workers"] == 4
    assert "(the fastest run)" in rec.text


def test_failed_runs_and_failed_delivery_are_never_recommended():
    runs = [result(0, 1000), result(2, 5000, delivery=False), result(4, 0, status="FAILED")]
    assert recommend(runs).result.params["loader.num_workers"] == 0


def test_table_has_a_row_per_configuration_with_speedup_and_notes(tmp_path):
    items = [(Path(str(i)), r) for i, r in enumerate([result(0, 1000), result(2, 2500), result(4, 0, status="FAILED")])]
    text = summary_table(items)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["num_workers", "status", "samples/s"]
    assert "2.50x" in lines[3] and "1.00x" in lines[2]
    assert "FAILED" in lines[4]
    assert "2: FAILED: RuntimeError: boom" in text
    assert "n/m: CUDA not available" in text
    assert "Recommendation: num_workers=2" in text


def test_report_writes_table_and_plot(tmp_path):
    items = [(Path(str(i)), r) for i, r in enumerate(
        [result(w, 1000 + 500 * w, pin=p) for w in (0, 1, 2) for p in (True, False)])]
    text, plot = write_report(items, tmp_path, "test sweep")
    assert (tmp_path / "report.txt").read_text().startswith(text.splitlines()[0])
    assert plot == tmp_path / "throughput.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and plot.stat().st_size > 10_000


def test_a_gap_beyond_tolerance_but_inside_the_noise_prefers_fewer_workers():
    runs = [result(0, 1000), result(2, 2700, iqr=0.12), result(3, 3000, iqr=0.04)]
    rec = recommend(runs, tolerance=0.05)
    assert rec.result.params["loader.num_workers"] == 2  # 10% below, spread 12%: not a measured difference
    assert rec.within_noise and "cannot tell them apart" in rec.text


def test_the_noise_allowance_is_capped():
    runs = [result(0, 1000, iqr=0.9), result(2, 3000, iqr=0.02)]
    rec = recommend(runs, tolerance=0.05)
    assert rec.result.params["loader.num_workers"] == 2  # 67% below is a difference, however noisy


def on_host(run: RunResult, hostname: str, cpu: str, cpus: int, measured: tuple[float, float] = (0.0, 1.0)) -> RunResult:
    run.host = HostFacts(hostname=hostname, cpu_model=cpu, cpu_count=cpus, gpu=None)
    run.info.measured_from, run.info.measured_until = measured
    return run


def test_a_sweep_over_two_node_types_gets_a_table_and_a_recommendation_each(tmp_path):
    """The same grid on two node types: one comparison per type, never one pick across both."""
    small = [on_host(result(w, rate), "a1", "Xeon Small", 8, (w, w + 0.5)) for w, rate in ((0, 1000), (2, 3000), (4, 3050))]
    large = [on_host(result(w, rate), f"b{w // 2 % 2}", "EPYC Large", 64, (10 + w, 10.5 + w))
             for w, rate in ((0, 1200), (2, 3000), (4, 6000))]
    items = [(Path(str(i)), r) for i, r in enumerate(small + large)]
    text = summary_table(items)
    assert "== Xeon Small, 8 CPUs: 3 runs on a1" in text and "== EPYC Large, 64 CPUs: 3 runs on b0, b1" in text
    first, second = text.split("== EPYC Large")
    assert "Recommendation: num_workers=2: 3,000 samples/s" in first
    assert "Recommendation: num_workers=4: 6,000 samples/s (the fastest run)" in second
    assert "same time" not in text
    _, plot = write_report(items, tmp_path)
    assert plot.stat().st_size > 10_000


def test_runs_that_measured_on_one_host_at_once_are_called_out():
    runs = [on_host(result(0, 1000), "a1", "Xeon", 8, (0, 2)), on_host(result(1, 900), "a1", "Xeon", 8, (1, 3)),
            on_host(result(2, 2000), "a2", "Xeon", 8, (1, 3)), on_host(result(3, 2100), "a1", "Xeon", 8, (3, 4))]
    text = summary_table([(Path(f"job{i}"), r) for i, r in enumerate(runs)])
    assert "! job0 and job1 measured on a1 at the same time" in text
    assert text.count(" at the same time") == 1  # another host, or one after the other, is fine


def test_a_sweep_over_rank_counts_recommends_workers_per_rank_for_each_count():
    """The ranks per node are the machine's GPUs, not a knob to pick: one recommendation per count."""
    runs = []
    for ranks, rates in ((1, (1000, 3000, 3100)), (2, (1900, 3600, 3700))):
        for workers, rate in zip((0, 2, 4), rates):
            run = result(workers, rate)
            run.params["dist.nproc_per_node"] = ranks
            run.metrics.update(ranks=float(ranks), throughput_slowest_rank_samples_per_s=rate / ranks * 0.9)
            runs.append(run)
    text = summary_table([(Path(str(i)), r) for i, r in enumerate(runs)])
    assert text.splitlines()[0].split()[:5] == ["num_workers", "dist.nproc_per_node", "status", "samples/s", "slowest"]
    assert "Recommendation: num_workers=2: 3,000 samples/s" in text
    assert "Recommendation: num_workers=2 per rank with 2 ranks: 3,600 samples/s across the ranks" in text
    assert "slowest: the slowest rank's samples/s" in text


def test_the_plot_is_titled_with_the_dataset_and_host_and_marks_the_pick(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    drawn = []
    saved = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: (drawn.append(self), saved(self, *a, **k))[1])
    runs = [result(w, 1000 + 500 * min(w, 2)) for w in (0, 1, 2, 3)]
    for r in runs:
        r.host = HostFacts(cpu_model="Test CPU", cpu_count=2)
    write_report([(Path(str(i)), r) for i, r in enumerate(runs)], tmp_path)
    ax = drawn[0].axes[0]
    assert ax.get_title() == "cifar10 on Test CPU, 2 CPUs"
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "pick (unconfirmed): num_workers=2" in labels  # the recommendation's: the fewest within the tolerance
    star = next(line for line in ax.get_lines() if line.get_marker() == "*")
    assert list(star.get_xdata()) == [2] and list(star.get_ydata()) == [2000]


def test_a_swept_config_group_is_one_axis_named_by_its_choice():
    """sampler=random,sequential changes sampler._target_, sampler.name and sampler.replacement together: one axis,
    "sampler=sequential"; a member swept within one choice stays an axis of its own."""
    from loaderexp.report.params import short_key, varying_params

    def run(workers: int, sampler: str, rate: float, fraction: float = 0.5) -> RunResult:
        made = result(workers, rate)
        made.params.update({"sampler.name": sampler, "sampler._target_": f"torch.{sampler.title()}Sampler",
                            "sampler.replacement": False if sampler == "random" else None})
        if sampler == "subset":
            made.params["sampler.fraction"] = fraction
        return made

    runs = [run(0, "random", 900), run(2, "random", 2000), run(0, "sequential", 1000), run(2, "sequential", 1990)]
    axes = varying_params(runs)
    assert axes == ["loader.num_workers", "sampler.name"] and [short_key(k) for k in axes] == ["num_workers", "sampler"]
    rec = recommend(runs, tolerance=0.05)
    assert "num_workers=2, sampler=random" in rec.text and "_target_" not in rec.text
    table = summary_table([(Path("x"), r) for r in runs])
    assert "sampler._target_" not in table and "sequential" in table
    subsets = [run(2, "subset", 1000, 0.1), run(2, "subset", 1500, 0.5), run(2, "random", 2000)]
    assert "sampler.fraction" in varying_params(subsets)  # it varies within the subset choice: an axis


def test_a_sweep_without_a_stage_profile_says_why_it_has_no_why():
    """An iterable dataset's sweep (or bench.profile_s=0) ended with its table and not a word of the model."""
    from loaderexp.report.ceiling import ceiling_sections
    from loaderexp.result.ceiling import ceiling_figures

    def unprofiled(profile_s: float) -> RunResult:
        run = result(2, 1000)
        run.params["bench.profile_s"] = profile_s
        run.info.ceiling = ceiling_figures(run)[1].ceiling
        return run

    assert ceiling_sections([unprofiled(0)]) == [
        "Why it is this fast: not modelled: no stage profile (bench.profile_s=0 leaves the profiling pass out)"]
    assert "an iterable dataset's stages" in ceiling_sections([unprofiled(2.0)])[0]


def test_the_pick_is_named_by_every_axis_searched_even_where_only_one_value_ran_to_the_end():
    """A search whose trials at batch 64 were all pruned: the pick is "batch_size=256, num_workers=2", as its
    confirmation says, not "num_workers=2"."""
    from loaderexp.result import metrics as M

    def trial(workers: int, batch: int, rate: float, pruned: bool = False) -> RunResult:
        run = result(workers, rate)
        run.params["loader.batch_size"] = batch
        if pruned:
            run.metrics[M.PRUNED] = 1.0
        return run

    rec = recommend([trial(2, 256, 2000), trial(3, 256, 1990), trial(1, 64, 900, pruned=True)], tolerance=0.05)
    assert rec.text.startswith("Recommendation: num_workers=2, batch_size=256: 2,000 samples/s")
