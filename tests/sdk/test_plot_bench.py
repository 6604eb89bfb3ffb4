"""tools/plot_bench.py on small `dsinfer bench serve` results: with and without per-request samples,
and a --find-max-qpm sweep. Needs matplotlib from .deps/venv, so it runs with the SDK tests."""

import contextlib
import importlib.util
import io
import json
import os
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location("plot_bench", os.path.join(ROOT, "tools", "plot_bench.py"))
plot_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot_bench)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def figures(ttft, tpot):
    out = {"completed": 3, "failed": 0, "qpm": 60.0}
    for metric, base in (("ttft", ttft), ("tpot", tpot)):
        for name, scale in (("mean", 1.1), ("median", 1.0), ("p90", 1.5), ("p99", 2.0)):
            out[f"{name}_{metric}_ms"] = base * scale
    return out


CONFIG = {"input_len": 128, "output_len": 64, "max_concurrency": 4, "request_rate": "inf"}
RUN = {"benchmark": "serve", "config": CONFIG, "device": "cpu: test (2 threads)", "commit": "abc1234",
       "figures": figures(100, 10)}
DETAILED = dict(RUN, per_request={"ttft_ms": [90, 100, None, 150], "tpot_ms": [9, 10, None, 15],
                                  "input_lens": [128] * 4, "output_lens": [64, 64, 0, 64]})
SWEEP = {"benchmark": "serve", "config": dict(CONFIG, max_concurrency=None, request_rate=1.0),
         "device": "cpu: test", "commit": "abc1234",
         "figures": {"slo_tpot_ms": 50.0, "max_qpm": 120.0, "max_qpm_request_rate": 2.0, "max_qpm_p90_tpot_ms": 40.0,
                     "probes": [{"request_rate": 1.0, "meets_slo": True, "qpm": 60.0, "p90_tpot_ms": 20.0},
                                {"request_rate": 2.0, "meets_slo": True, "qpm": 120.0, "p90_tpot_ms": 40.0},
                                {"request_rate": 4.0, "meets_slo": False, "qpm": 130.0, "p90_tpot_ms": 80.0}],
                     "best_probe": figures(50, 30)}}


class PlotBenchTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, data):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    def plot(self, *results):
        out = os.path.join(self.dir.name, "out.png")
        stderr, stdout = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
            self.assertEqual(plot_bench.main([*results, "-o", out]), 0)
        with open(out, "rb") as f:
            self.assertEqual(f.read(8), PNG_MAGIC)
        return stdout.getvalue(), stderr.getvalue()

    def test_samples_give_a_cdf_of_the_successful_requests(self):
        [run] = plot_bench.Result(self.write("detailed.json", DETAILED)).runs()
        self.assertEqual(run.samples, {"ttft": [90, 100, 150], "tpot": [9, 10, 15]})
        stdout, stderr = self.plot(self.write("detailed.json", DETAILED))
        self.assertIn("2 panels, 1 runs", stdout)
        self.assertEqual(stderr, "")

    def test_a_result_without_samples_says_so_and_draws_its_percentiles(self):
        [run] = plot_bench.Result(self.write("plain.json", RUN)).runs()
        self.assertEqual(run.samples, {})
        self.assertEqual(run.percentiles("tpot"), [(10, 0.5), (15, 0.9), (20, 0.99)])
        _, stderr = self.plot(self.write("plain.json", RUN))
        self.assertIn("plain.json: no per-request samples", stderr)

    def test_a_sweep_adds_its_curve_and_its_best_probe(self):
        [best] = plot_bench.Result(self.write("sweep.json", SWEEP)).runs()
        self.assertIn("best probe at 2 req/s", best.label)
        self.assertEqual(best.percentiles("ttft")[0], (50, 0.5))
        stdout, _ = self.plot(self.write("plain.json", RUN), self.write("sweep.json", SWEEP))
        self.assertIn("3 panels, 2 runs, 1 sweeps", stdout)

    def test_another_benchmarks_file_is_refused(self):
        with self.assertRaises(SystemExit) as raised:
            plot_bench.main([self.write("other.json", {"benchmark": "generate", "figures": {}}), "-o", "x.png"])
        self.assertIn("is not a `dsinfer bench serve --out` result", str(raised.exception))


if __name__ == "__main__":
    unittest.main()
