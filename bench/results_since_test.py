#!/usr/bin/python3
"""Tests of what bench/make_results.py reports beside one run's figures: the
"Since the previous run" section against the previous run's reports
(--baseline, bench/results_since.py; a change for the worse of more than 20%
in bold, an unusable baseline said, not an error) and the machine load of
each row (bench/results_load.py)."""

import contextlib
import importlib.util
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_results_test import SCRIPT, summary  # noqa: E402  (bench/make_results_test.py)


def figures(summary_row, rate=None, p50=None, p99=None, **fields):
    """`summary_row` with its throughput, p50 and p99 set apart."""
    if rate is not None:
        summary_row.update(mean_rate=rate, min_rate=rate, max_rate=rate)
    if p50 is not None:
        summary_row["p50_us"] = p50
    if p99 is not None:
        summary_row["p99_us"] = p99
    summary_row.update(fields)
    return summary_row


class MachineLoadTest(unittest.TestCase):
    """Rows measured beside other work are marked, and the run says how busy
    the machine was (bench/results_load.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_script(self, report, baseline=None):
        path = os.path.join(self.dir, "g.json")
        with open(path, "w") as f:
            json.dump(report, f)
        out = os.path.join(self.dir, "RESULTS.md")
        extra = ["--baseline", baseline] if baseline else []
        p = subprocess.run([sys.executable, SCRIPT, "--out", out, *extra, path],
                           capture_output=True, text=True)
        with open(out) as f:
            return p.returncode, f.read(), p.stderr

    def test_a_busy_row_is_marked_and_named(self):
        quiet = dict(summary("ask", "hosted"), other_cores=0.01, steal_cores=0.0)
        loaded = dict(summary("oneway", "hosted", rate=1e6), other_cores=0.9,
                      steal_cores=0.05)
        rc, md, err = self.run_script({"arm": "granary", "summaries": [quiet, loaded]})
        self.assertEqual(rc, 0, err)
        self.assertIn("## Machine load", md)
        self.assertIn("At most 0.90 cores of other work and 0.05 stolen "
                      "(Granary (hosted), oneway)", md)
        self.assertIn("| Granary (hosted) | 1.00 M/s (±1.5%) ‡ |", md)
        self.assertIn("| Granary (hosted) | 1.0 k/s (±1.5%) |", md)
        self.assertIn("the code's: Granary (hosted) oneway.", md)

    def test_stolen_time_alone_marks_a_row(self):
        stolen = dict(summary("ask", "hosted"), other_cores=0.0, steal_cores=0.3)
        rc, md, err = self.run_script({"arm": "granary", "summaries": [stolen]})
        self.assertEqual(rc, 0, err)
        self.assertIn("(±1.5%) ‡ |", md)

    def test_a_quiet_run_says_so(self):
        quiet = dict(summary("ask", "hosted"), other_cores=0.19, steal_cores=0.0)
        rc, md, err = self.run_script({"arm": "granary", "summaries": [quiet]})
        self.assertEqual(rc, 0, err)
        self.assertIn("the machine was quiet", md)
        self.assertNotIn("‡", md)

    def test_reports_without_load_figures_have_no_section(self):
        rc, md, err = self.run_script({"arm": "granary", "summaries": [
            summary("ask", "hosted")]})
        self.assertEqual(rc, 0, err)
        self.assertNotIn("## Machine load", md)
        self.assertNotIn("‡", md)

    def test_a_change_beside_a_busy_machine_says_so(self):
        baseline = os.path.join(self.dir, "baseline")
        os.mkdir(baseline)
        with open(os.path.join(baseline, "hosted.json"), "w") as f:
            json.dump({"arm": "granary", "summaries": [
                dict(summary("oneway", "hosted", rate=3e6), other_cores=0.0)]}, f)
        rc, md, err = self.run_script({"arm": "granary", "summaries": [
            dict(summary("oneway", "hosted", rate=1e6), other_cores=1.0)]},
            baseline=baseline)
        self.assertEqual(rc, 0, err)
        self.assertIn("**3.00 M/s → 1.00 M/s (-66.7%)**", md)
        self.assertIn("±4.2% ‡ machine busy |", md)


class SinceTheBaselineTest(unittest.TestCase):
    """--baseline DIR: the report opens with every headline figure beside
    the previous run's (bench/results_since.py)."""

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.baseline = os.path.join(self.dir, "baseline")
        os.mkdir(self.baseline)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, directory, name, content):
        path = os.path.join(directory, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def previous_run(self, commit="abc1234"):
        """The baseline: a full run (5 rounds at scale 5) of hosted rows and CAF's."""
        def hosted(scenario, **kw):
            return figures(summary(scenario, "hosted"), rounds=5, **kw)
        self.write(self.baseline, "hosted.json", {"arm": "granary", "env": {"scale": "5"},
                                                  "summaries": [
            hosted("ask", rate=1000.0, p50=10.0, p99=40.0),
            hosted("ask", rate=5000.0, p50=30.0, p99=90.0, concurrency=16),
            hosted("oneway", rate=4000000.0),
            hosted("chain", p50=4.0, p99=16.0),
            hosted("pingpong", rate=5000000.0),
            hosted("hotspot", rate=60000.0, concurrency=16),
            hosted("activation", rate=100000.0),
            figures(summary("raw_grpc", "remote"), rounds=5)]})
        self.write(self.baseline, "caf.json", {"arm": "caf", "summaries": [
            summary("ask", "caf", p50=20.0), summary("oneway", "caf", rate=1000000.0),
            summary("chain", "caf", p50=16.0), summary("pingpong", "caf", rate=1000000.0),
            summary("activation", "caf", rate=100000.0)]})
        if commit is not None:
            self.write(self.baseline, "COMMIT", commit + "\n")

    def this_run(self):
        """This run: a quick one (2 rounds at scale 0.5). ask p50 +30%, oneway
        -25%, chain p50 -25% but p99 +25%, pingpong -18%, hotspot refused;
        activation gone, fanout new."""
        g = self.write(self.dir, "hosted.json", {"arm": "granary", "env": {"scale": "0.5"},
                                                 "summaries": [
            figures(summary("ask", "hosted"), rate=1300.0, p50=13.0, p99=40.0),
            figures(summary("ask", "hosted"), rate=5000.0, p50=30.0, p99=90.0, concurrency=16),
            figures(summary("oneway", "hosted"), rate=3000000.0),
            figures(summary("chain", "hosted"), p50=3.0, p99=20.0),
            figures(summary("pingpong", "hosted"), rate=4100000.0),
            figures(summary("hotspot", "hosted", verified=False, failures=["lost calls"]),
                    rate=60000.0, concurrency=16),
            figures(summary("fanout", "hosted"), rate=2000.0),
            summary("raw_grpc", "remote")]})
        c = self.write(self.dir, "caf.json", {"arm": "caf", "summaries": [
            summary("ask", "caf", p50=20.0), summary("oneway", "caf", rate=1000000.0),
            summary("chain", "caf", p50=16.0), summary("pingpong", "caf", rate=1000000.0)]})
        return g, c

    def run_script(self, *reports, baseline=None, commit="def5678", extra=()):
        out = os.path.join(self.dir, "RESULTS.md")
        p = subprocess.run([sys.executable, SCRIPT, "--out", out, "--env-commit", commit,
                            "--baseline", baseline or self.baseline, *extra, *reports],
                           capture_output=True, text=True)
        text = ""
        if os.path.exists(out):
            with open(out) as f:
                text = f.read()
        return p.returncode, text, p.stdout, p.stderr

    @staticmethod
    def since(md):
        return md.split("## Since the previous run", 1)[1].split("\n## ", 1)[0]

    def line(self, md, start):
        lines = [l for l in self.since(md).splitlines() if l.startswith(start)]
        self.assertEqual(len(lines), 1, md)
        return lines[0]

    def test_every_granary_row_beside_the_previous_run(self):
        self.previous_run()
        rc, md, out, err = self.run_script(*self.this_run())
        self.assertEqual(rc, 1, err)  # the refused hotspot row, not the comparison
        # Right after the introduction, before the environment and the tables.
        self.assertLess(md.index("Generated by `make bench`"),
                        md.index("## Since the previous run"))
        self.assertLess(md.index("## Since the previous run"), md.index("## Environment"))
        self.assertIn("Commits `abc1234..def5678`.", self.since(md))
        self.assertIn("| scenario | row | throughput | p50 | p99 | noise |", self.since(md))
        self.assertEqual(
            self.line(md, "| ask | Granary (hosted) |"),
            "| ask | Granary (hosted) | 1.0 k/s → 1.3 k/s (+30.0%) | "
            "**10.00 µs → 13.00 µs (+30.0%)** | 40.00 µs → 40.00 µs (+0.0%) | ±4.2% |")
        # Callers in flight tell rows of one scenario and mode apart.
        self.assertEqual(
            self.line(md, "| ask | Granary (hosted, K=16) |"),
            "| ask | Granary (hosted, K=16) | 5.0 k/s → 5.0 k/s (+0.0%) | "
            "30.00 µs → 30.00 µs (+0.0%) | 90.00 µs → 90.00 µs (+0.0%) | ±4.2% |")
        # Comparison arms and granary-bench's own reference rows are not Granary's figures.
        self.assertNotIn("CAF", self.since(md).split("| goal |")[0])
        self.assertNotIn("raw_grpc", self.since(md))

    def test_a_change_for_the_worse_of_more_than_20_percent_is_bold(self):
        self.previous_run()
        rc, md, out, err = self.run_script(*self.this_run())
        # Throughput: lower is worse.
        self.assertIn("| **4.00 M/s → 3.00 M/s (-25.0%)** |",
                      self.line(md, "| oneway | Granary (hosted) |"))
        # -18% is within the bound; +30% throughput is better, never bold.
        self.assertIn("| 5.00 M/s → 4.10 M/s (-18.0%) |",
                      self.line(md, "| pingpong | Granary (hosted) |"))
        self.assertIn("| 1.0 k/s → 1.3 k/s (+30.0%) |",
                      self.line(md, "| ask | Granary (hosted) |"))
        # Latency: higher is worse; 25% lower is better, never bold.
        chain = self.line(md, "| chain | Granary (hosted) |")
        self.assertIn("| 4.00 µs → 3.00 µs (-25.0%) | **16.00 µs → 20.00 µs (+25.0%)** |", chain)
        # A row refused now has no figures, and that is worse still.
        self.assertTrue(self.line(md, "| hotspot | Granary (hosted, K=16) |").endswith(
            "| **60.0 k/s → refused** | **12.50 µs → refused** | **50.00 µs → refused** | – |"))
        self.assertNotIn("60.0 k/s → 60.0 k/s", md)

    def test_goal_ratios_are_judged_in_their_goals_direction(self):
        self.previous_run()
        rc, md, out, err = self.run_script(*self.this_run())
        self.assertIn("| goal | previous ratio | ratio | change |", self.since(md))
        # ≥ goal: a lower ratio is worse.
        self.assertEqual(
            self.line(md, "| hosted one-way ≥ 2× the better of CAF tell and Erlang send |"),
            "| hosted one-way ≥ 2× the better of CAF tell and Erlang send | ×4.00 (met) | "
            "×3.00 (met) | **-25.0%** |")
        self.assertTrue(self.line(md, "| hosted ping-pong ≥ 2× the better of CAF and Erlang |")
                        .endswith("| ×5.00 (met) | ×4.10 (met) | -18.0% |"))
        # ≤ goal: a higher ratio is worse, a lower one better.
        self.assertTrue(self.line(md, "| hosted ask p50 ≤ CAF's |")
                        .endswith("| ×0.50 (met) | ×0.65 (met) | **+30.0%** |"))
        self.assertTrue(self.line(md, "| hosted chain (depth 5) p50 ≤ 0.5× the better of CAF "
                                      "and Erlang |")
                        .endswith("| ×0.25 (met) | ×0.19 (met) | -25.0% |"))
        # A goal measured in one run only; goals measured in neither are left out.
        self.assertTrue(self.line(md, "| hosted activation ≥ 1.0× the better of CAF spawn")
                        .endswith("| ×1.00 (met) | not measured | – |"))
        self.assertNotIn("failover", self.since(md))

    def test_rows_of_one_run_only_are_new_or_gone(self):
        self.previous_run()
        rc, md, out, err = self.run_script(*self.this_run())
        self.assertEqual(self.line(md, "| fanout | Granary (hosted) |"),
                         "| fanout | Granary (hosted) | new: 2.0 k/s | new: 12.50 µs | "
                         "new: 50.00 µs | – |")
        self.assertEqual(self.line(md, "| activation | Granary (hosted) |"),
                         "| activation | Granary (hosted) | gone (was 100.0 k/s) | "
                         "gone (was 12.50 µs) | gone (was 50.00 µs) | – |")

    def test_the_commit_range_says_local_changes_and_a_missing_commit(self):
        self.previous_run(commit="abc1234 (with local changes)")
        rc, md, out, err = self.run_script(*self.this_run(), commit="def5678")
        self.assertIn("Commits `abc1234..def5678` (the previous run was built with local "
                      "changes).", md)
        os.remove(os.path.join(self.baseline, "COMMIT"))
        rc, md, out, err = self.run_script(*self.this_run(), commit="abc1234")
        self.assertIn("Commits `?..abc1234`.", md)
        self.previous_run(commit="abc1234")
        rc, md, out, err = self.run_script(*self.this_run(),
                                           commit="abc1234 (with local changes)")
        self.assertIn("Commits `abc1234` (the same commit; this run was built with local "
                      "changes).", md)

    def test_print_since_prints_the_comparison_and_how_much_is_noise(self):
        self.previous_run()
        rc, md, out, err = self.run_script(*self.this_run(), extra=["--print-since"])
        self.assertIn("## Since the previous run", out)
        self.assertIn("| oneway | Granary (hosted) | **4.00 M/s → 3.00 M/s (-25.0%)** |", out)
        self.assertEqual(out.strip(), ("## Since the previous run" + self.since(md)).strip())
        # Each row's spread is 1.5%: 2·√(1.5² + 1.5²) = 4.2%.
        self.assertIn("this run measured 2 round(s) at scale 0.5, the previous 5 round(s) at "
                      "scale 5", out)
        self.assertIn("changes within ±4.2% are noise", out)
        self.assertIn("A spread of two rounds is itself a rough figure.", out)
        self.assertIn("The two runs differ in size", out)
        # Without --print-since nothing is printed; without --baseline it is refused.
        rc, md, out, err = self.run_script(*self.this_run())
        self.assertEqual(out, "")
        p = subprocess.run([sys.executable, SCRIPT, "--out", os.path.join(self.dir, "x.md"),
                            "--print-since", self.this_run()[0]], capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--print-since needs --baseline", p.stderr)

    def test_without_a_usable_baseline_the_report_says_so(self):
        g = self.write(self.dir, "g.json", {"arm": "granary", "summaries": [
            summary("ask", "hosted")]})
        cases = [
            ("missing", os.path.join(self.dir, "nowhere"),
             "the baseline directory does not exist", False),
            ("empty", self.baseline, "the baseline directory holds no reports yet", False),
        ]
        bad = os.path.join(self.dir, "bad")
        os.mkdir(bad)
        self.write(bad, "hosted.json", "{not json")
        cases.append(("corrupt", bad, "its hosted.json is not readable JSON (", True))
        not_report = os.path.join(self.dir, "not-report")
        os.mkdir(not_report)
        self.write(not_report, "hosted.json", [1, 2])
        cases.append(("not a report", not_report,
                      "its hosted.json is not a readable report: not a benchmark report", True))
        bad_figure = os.path.join(self.dir, "bad-figure")
        os.mkdir(bad_figure)
        self.write(bad_figure, "hosted.json", {"arm": "granary", "summaries": [
            figures(summary("ask", "hosted"), rate="fast")]})
        self.write(bad_figure, "caf.json", {"arm": "caf", "summaries": []})
        cases.append(("bad figure", bad_figure, "its hosted.json is not a readable report: a "
                      "row of hosted ask with a figure that is not a number", True))
        binary = os.path.join(self.dir, "binary")
        os.mkdir(binary)
        with open(os.path.join(binary, "hosted.json"), "wb") as f:
            f.write(b"\xff\xfe\x00garbage")
        cases.append(("not text", binary, "its hosted.json is not readable JSON (", True))
        for name, directory, problem, is_error in cases:
            with self.subTest(name):
                rc, md, out, err = self.run_script(g, baseline=directory, extra=["--print-since"])
                self.assertEqual(rc, 0, err)
                self.assertIn("No previous run to compare with: " + problem, self.since(md))
                self.assertIn("No previous run to compare with: " + problem, out)
                self.assertIn("| Granary (hosted) | 1.0 k/s", md)  # the report as usual
                self.assertIn("## Goals", md)
                if is_error:
                    self.assertIn("make_results: baseline %s ignored: %s" % (directory, problem),
                                  err)
                else:
                    self.assertEqual(err, "")


class ResultsSinceTest(unittest.TestCase):
    """bench/results_since.py's parts."""

    @classmethod
    def setUpClass(cls):
        spec = importlib.util.spec_from_file_location("make_results", SCRIPT)
        cls.make_results = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.make_results)
        cls.since = cls.make_results.results_since

    def test_change_is_worse_by_direction_beyond_20_percent(self):
        change = self.since.change
        self.assertEqual(change(100.0, 79.0, True), (-21.0, True))     # throughput down
        self.assertEqual(change(100.0, 80.0, True), (-20.0, False))    # exactly 20%: not beyond
        self.assertEqual(change(100.0, 150.0, True), (50.0, False))    # throughput up
        self.assertEqual(change(100.0, 121.0, False), (21.0, True))    # latency up
        self.assertEqual(change(100.0, 120.0, False), (20.0, False))
        self.assertEqual(change(100.0, 50.0, False), (-50.0, False))   # latency down
        self.assertEqual(change(0.0, 50.0, False), (None, False))      # no previous figure
        self.assertEqual(change(None, 50.0, True), (None, False))

    def test_goals_of_one_run_only_are_new_or_gone(self):
        Goal = self.make_results.Goal
        old = [Goal("a ≥ 2×", "a", "…", True, 4.0, 2.0, "≥"),
               Goal("gone ≤ 1×", "g", "…", True, 0.5, 1.0, "≤"),
               Goal("failover", "f", "0 in 3 round(s)", True)]
        new = [Goal("a ≥ 2×", "a", "…", True, 2.5, 2.0, "≥"),
               Goal("new ≤ 1×", "n", "…", False, 1.5, 1.0, "≤"),
               Goal("failover", "f", "0 in 3 round(s)", True)]
        self.assertEqual(self.since.goal_rows(old, new), [
            "| a ≥ 2× | ×4.00 (met) | ×2.50 (met) | **-37.5%** |",
            "| new ≤ 1× | – | ×1.50 (missed) | new |",
            "| gone ≤ 1× | ×0.50 (met) | – | gone |"])

    def test_reports_that_cannot_be_turned_into_rows_are_no_baseline(self):
        directory = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, directory, ignore_errors=True)
        with open(os.path.join(directory, "hosted.json"), "w") as f:
            json.dump({"arm": "granary", "summaries": [summary("ask", "hosted")]}, f)

        def broken(reports):
            raise KeyError("verified")
        row = dict(summary("ask", "hosted"), arm="granary", env={})
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            lines = self.since.since_section(directory, [row], [], "def5678", broken,
                                             self.make_results.label,
                                             self.make_results.fmt_rate,
                                             self.make_results.fmt_us)
        self.assertIn("ignored: its reports cannot be read", err.getvalue())
        self.assertIn("No previous run to compare with: its reports cannot be read (KeyError: "
                      "'verified').", " ".join(lines))


if __name__ == "__main__":
    unittest.main()
