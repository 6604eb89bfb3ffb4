#!/usr/bin/env python3
"""Draws the plots people look at from `dsinfer bench serve --out` results, as one PNG.

    python3 tools/plot_bench.py bench/results/serve_dsv3-tiny.json [more.json ...] -o docs/serve_cpu.png

Panels:
  - TTFT and TPOT distributions, as CDFs, one line per run. A run saved with --save-detailed has
    per-request samples (per_request.ttft_ms / tpot_ms): its CDF is the samples'. Without them the
    file holds only the median, p90 and p99 (and the mean): those points are drawn on the same axes,
    joined by a dashed line, and the legend says "percentiles only".
  - For a --find-max-qpm sweep: throughput (QPM; output tok/s on the right axis) against p90 TPOT,
    one point per probe, with the SLO and the best probe marked. The sweep's best probe also joins
    the TTFT and TPOT panels (a sweep keeps no per-request samples).

Runs with matplotlib from .deps/venv (`make deps`); started by another python3 without matplotlib,
it re-runs itself under .deps/venv/bin/python when that exists.
"""

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_PYTHON = os.path.join(ROOT, ".deps", "venv", "bin", "python")
QUANTILES = (("median", 0.5), ("p90", 0.9), ("p99", 0.99))


def import_pyplot():
    try:
        import matplotlib
    except ImportError:
        if os.path.exists(VENV_PYTHON) and os.path.realpath(sys.executable) != os.path.realpath(VENV_PYTHON):
            os.execv(VENV_PYTHON, [VENV_PYTHON, os.path.abspath(__file__)] + sys.argv[1:])
        sys.exit("plot_bench: matplotlib is not installed: run `make deps` (it makes .deps/venv), then "
                 "`.deps/venv/bin/python tools/plot_bench.py ...`")
    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as pyplot
    return pyplot


class Run:
    """One measured run: a plain result, or a sweep's best probe. Distributions in ms."""

    def __init__(self, label, figures, per_request=None):
        self.label = label
        self.figures = figures
        self.samples = {}
        for metric in ("ttft", "tpot"):
            values = [v for v in (per_request or {}).get(f"{metric}_ms", []) if v is not None]
            if values:
                self.samples[metric] = sorted(values)

    def percentiles(self, metric):
        """(value in ms, quantile) for the percentiles the file holds."""
        points = []
        for name, quantile in QUANTILES:
            value = self.figures.get(f"{name}_{metric}_ms")
            if value is not None:
                points.append((value, quantile))
        return points


class Result:
    """One result file of `dsinfer bench serve`."""

    def __init__(self, path):
        with open(path) as f:
            data = json.load(f)
        if data.get("benchmark") != "serve" or "figures" not in data:
            raise SystemExit(f"plot_bench: {path} is not a `dsinfer bench serve --out` result "
                             f"(benchmark {data.get('benchmark')!r})")
        self.path = path
        self.config = data.get("config", {})
        self.figures = data["figures"]
        self.device = data.get("device", "?")
        self.commit = data.get("commit", "?")
        self.is_sweep = "probes" in self.figures
        self.per_request = data.get("per_request")

    def describe(self):
        """Where and how it was measured, short enough for a legend."""
        device = self.device.split("(")[0].strip().rstrip(":")
        load = (f"conc {self.config['max_concurrency']}" if self.config.get("max_concurrency")
                else f"rate {self.config.get('request_rate')}/s")
        return (f"{device}, {self.config.get('input_len')} in / {self.config.get('output_len')} out, "
                f"{load}, {self.commit}")

    def runs(self):
        stem = os.path.splitext(os.path.basename(self.path))[0]
        if not self.is_sweep:
            return [Run(f"{stem} ({self.describe()})", self.figures, self.per_request)]
        best = self.figures.get("best_probe")
        if not best:
            return []
        rate = self.figures.get("max_qpm_request_rate")
        return [Run(f"{stem}, best probe at {rate:g} req/s ({self.describe().split(', rate')[0]})", best)]


def short_ms(value):
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def draw_cdf(axes, runs, metric, title, pyplot):
    colors = pyplot.rcParams["axes.prop_cycle"].by_key()["color"]
    values = []
    for index, run in enumerate(runs):
        color = colors[index % len(colors)]
        if metric in run.samples:
            xs = run.samples[metric]
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            axes.step(xs, ys, where="post", color=color, label=f"{run.label}: {len(xs)} requests")
            values += xs
        points = run.percentiles(metric)
        if points:
            xs, ys = zip(*points)
            values += xs
            if metric in run.samples:
                axes.plot(xs, ys, "o", color=color, markersize=4)
            else:
                axes.plot(xs, ys, "o--", color=color, label=f"{run.label}: percentiles only")
            for x, y in points:
                axes.annotate(short_ms(x), (x, y), textcoords="offset points", xytext=(4, -10), fontsize=7,
                              color=color)
        mean = run.figures.get(f"mean_{metric}_ms")
        if mean is not None:
            axes.axvline(mean, color=color, linestyle=":", linewidth=1)
    positive = [v for v in values if v > 0]
    if positive and max(positive) / min(positive) > 20:
        axes.set_xscale("log")  # runs of different machines differ by orders of magnitude
    axes.set_title(title)
    axes.set_xlabel("ms (dotted: mean)")
    axes.set_ylabel("fraction of requests")
    axes.set_ylim(0, 1.02)
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="best")


def draw_sweep(axes, result):
    figures = result.figures
    probes = sorted(figures["probes"], key=lambda p: p["request_rate"])
    output_len = result.config.get("output_len")
    xs = [p["p90_tpot_ms"] for p in probes]
    ys = [p["qpm"] for p in probes]
    axes.plot(xs, ys, "-", color="gray", linewidth=1)
    for probe in probes:
        style = dict(marker="o", color="tab:green") if probe["meets_slo"] else dict(marker="x", color="tab:red")
        axes.plot(probe["p90_tpot_ms"], probe["qpm"], linestyle="none", **style)
        axes.annotate(f"{probe['request_rate']:g}/s", (probe["p90_tpot_ms"], probe["qpm"]),
                      textcoords="offset points", xytext=(5, 3), fontsize=7)
    slo = figures.get("slo_tpot_ms")
    if slo is not None:
        axes.axvline(slo, color="tab:red", linestyle="--", linewidth=1, label=f"SLO: p90 TPOT {slo:g} ms")
    if figures.get("max_qpm") is not None:
        axes.plot(figures["max_qpm_p90_tpot_ms"], figures["max_qpm"], "o", markersize=12, markerfacecolor="none",
                  color="tab:green", label=f"max QPM meeting the SLO: {figures['max_qpm']:.0f}")
    axes.plot([], [], "o", color="tab:green", label="probe meets the SLO")
    axes.plot([], [], "x", color="tab:red", label="probe misses it")
    if output_len:
        # Each request asks for output_len tokens (the bench ignores EOS): QPM converts exactly.
        right = axes.secondary_yaxis("right", functions=(lambda q: q * output_len / 60,
                                                         lambda t: t * 60 / output_len))
        right.set_ylabel("output tokens/s")
    axes.set_title(f"throughput vs TPOT ({os.path.basename(result.path)})")
    axes.set_xlabel("p90 TPOT (ms), request rate per point")
    axes.set_ylabel("requests per minute (QPM)")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=7, loc="lower right")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON files written by `dsinfer bench serve --out`")
    parser.add_argument("-o", "--out", required=True, help="the PNG to write")
    parser.add_argument("--title", default=None, help="a title over the panels")
    parser.add_argument("--dpi", type=int, default=110)
    args = parser.parse_args(argv)

    results = [Result(path) for path in args.results]
    runs = [run for result in results for run in result.runs()]
    sweeps = [result for result in results if result.is_sweep]
    missing = [os.path.basename(r.path) for r in results if not r.is_sweep and not r.per_request]
    if missing:
        print(f"plot_bench: {', '.join(missing)}: no per-request samples (run the bench with --save-detailed); "
              "drawing the percentiles the file holds", file=sys.stderr)

    pyplot = import_pyplot()
    panels = (2 if runs else 0) + len(sweeps)
    figure, axes = pyplot.subplots(1, panels, figsize=(6.2 * panels, 4.6), squeeze=False)
    axes = list(axes[0])
    if runs:
        draw_cdf(axes.pop(0), runs, "ttft", "time to first token (TTFT)", pyplot)
        draw_cdf(axes.pop(0), runs, "tpot", "time per output token (TPOT, after the first)", pyplot)
    for result in sweeps:
        draw_sweep(axes.pop(0), result)
    if args.title:
        figure.suptitle(args.title)
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    figure.savefig(args.out, dpi=args.dpi)
    print(f"plot_bench: wrote {args.out} ({panels} panels, {len(runs)} runs, {len(sweeps)} sweeps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
