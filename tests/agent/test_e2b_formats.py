"""The representations E2B's code interpreter adds (execbox_agent/e2b_formats.py, charts.py),
given only when the request's extra_mimes asks: the columns of a DataFrame, the chart of a
matplotlib figure, application/json of a list or dict. Run like test_agent.py (its run_agent)."""
import unittest

from test_agent import HAVE_MATPLOTLIB, HAVE_PANDAS, AgentTestCase, run_agent

E2B = ["application/vnd.e2b.data+json", "application/vnd.e2b.chart+json", "application/json"]


def chart_of(code):
    run = run_agent("import matplotlib.pyplot as plt\n" + code + "\nplt.show()", extra_mimes=E2B)
    displays = run.of_type("display")
    return run, [d["data"].get("application/vnd.e2b.chart+json") for d in displays]


class ExtraMimesTest(AgentTestCase):
    def test_not_asked_not_given(self):
        run = run_agent("{'a': [1, 2]}")
        self.assertClean(run)
        self.assertNotIn("application/json", run.one("result")["data"])

    def test_list_and_dict_as_json(self):
        run = run_agent("{'a': [1, 2], 'b': None}", extra_mimes=E2B)
        self.assertClean(run)
        self.assertEqual(run.one("result")["data"]["application/json"], {"a": [1, 2], "b": None})
        # Not JSON as it is (a set inside): left out, no complaint.
        run = run_agent("[{1, 2}]", extra_mimes=E2B)
        self.assertClean(run)
        self.assertNotIn("application/json", run.one("result")["data"])

    def test_an_unknown_extra_mime_is_refused(self):
        run = run_agent("1", extra_mimes=["e2b/nope"])
        self.assertNotEqual(run.returncode, 0)
        self.assertIn("extra_mimes", str(run.events) + run.stderr.decode())


@unittest.skipUnless(HAVE_PANDAS, "python3-pandas is not installed")
class FrameDataTest(AgentTestCase):
    def test_columns_as_lists_in_plain_json(self):
        code = ("import pandas as pd, numpy as np\n"
                "pd.DataFrame({'a': [1, 2], 'b': [0.5, np.nan], 'when': pd.to_datetime(['2024-01-02', None]),"
                " 3: ['x', 'y']})")
        run = run_agent(code, extra_mimes=E2B)
        self.assertClean(run)
        data = run.one("result")["data"]
        self.assertEqual(data["application/vnd.e2b.data+json"], {"a": [1, 2], "b": [0.5, None],
                                            "when": ["2024-01-02T00:00:00", None], "3": ["x", "y"]})
        self.assertIn("<table", data["text/html"])

    def test_displayed_frame_too_and_not_a_series(self):
        run = run_agent("import pandas as pd\ndisplay(pd.DataFrame({'a': [1]}))\npd.Series([1])",
                        extra_mimes=E2B)
        self.assertClean(run)
        self.assertEqual(run.one("display")["data"]["application/vnd.e2b.data+json"], {"a": [1]})
        self.assertNotIn("application/vnd.e2b.data+json", run.one("result")["data"])


@unittest.skipUnless(HAVE_MATPLOTLIB, "python3-matplotlib is not installed")
class ChartTest(AgentTestCase):
    def test_bar(self):
        run, charts = chart_of(
            "plt.figure(figsize=(6, 4))\n"
            "plt.bar(['Author A', 'Author B', 'Author C'], [100, 200, 300], label='Books Sold')\n"
            "plt.xlabel('Authors')\nplt.ylabel('Number of Books Sold')\nplt.title('Book Sales by Authors')")
        self.assertClean(run)
        chart = charts[0]
        self.assertEqual(chart["type"], "bar")
        self.assertEqual(chart["title"], "Book Sales by Authors")
        self.assertEqual((chart["x_label"], chart["y_label"]), ("Authors", "Number of Books Sold"))
        self.assertEqual((chart["x_unit"], chart["y_unit"]), (None, None))
        self.assertEqual([e["value"] for e in chart["elements"]], [100, 200, 300])
        self.assertEqual([e["label"] for e in chart["elements"]], ["Author A", "Author B", "Author C"])
        self.assertEqual({e["group"] for e in chart["elements"]}, {"Books Sold"})

    def test_line_with_dates_and_units(self):
        run, charts = chart_of(
            "import datetime\n"
            "days = [datetime.datetime(2023, 9, 1) + datetime.timedelta(days=i) for i in range(5)]\n"
            "plt.plot(days, [1, 2, 3, 2, 1], label='up')\nplt.plot(days, [0, 1, 0, 1, 0], label='zig')\n"
            "plt.xlabel('Time (s)')\nplt.ylabel('Amplitude [Hz]')")
        self.assertClean(run)
        chart = charts[0]
        self.assertEqual(chart["type"], "line")
        self.assertEqual((chart["x_unit"], chart["y_unit"]), ("s", "Hz"))
        self.assertEqual((chart["x_scale"], chart["y_scale"]), ("datetime", "linear"))
        self.assertTrue(all(isinstance(t, str) for t in chart["x_ticks"]), chart["x_ticks"])
        self.assertTrue(all(isinstance(t, (int, float)) for t in chart["y_ticks"]))
        self.assertEqual(len(chart["x_tick_labels"]), len(chart["x_ticks"]))
        up, zig = chart["elements"]
        self.assertEqual((up["label"], zig["label"]), ("up", "zig"))
        self.assertEqual(up["points"][0], ["2023-09-01T00:00:00", 1])
        self.assertEqual(len(zig["points"]), 5)

    def test_scatter(self):
        run, charts = chart_of("plt.scatter([1, 2, 3], [4, 5, 6], label='one')\n"
                               "plt.scatter([0.5], [1.5], label='two')")
        self.assertClean(run)
        chart = charts[0]
        self.assertEqual(chart["type"], "scatter")
        self.assertIsNone(chart["title"])
        self.assertEqual(chart["elements"][0], {"label": "one", "points": [[1, 4], [2, 5], [3, 6]]})
        self.assertEqual(chart["elements"][1]["points"], [[0.5, 1.5]])

    def test_pie(self):
        run, charts = chart_of("fig, ax = plt.subplots()\n"
                               "ax.pie([90, 10], labels=['No', 'No, in blue'], startangle=90)\n"
                               "plt.title('Will I wake up early tomorrow?')")
        self.assertClean(run)
        chart = charts[0]
        self.assertEqual(chart["type"], "pie")
        self.assertEqual(chart["title"], "Will I wake up early tomorrow?")
        self.assertEqual(chart["elements"], [{"label": "No", "angle": 324, "radius": 1},
                                             {"label": "No, in blue", "angle": 36, "radius": 1}])

    def test_box_and_whisker(self):
        run, charts = chart_of(
            "data = {'Class A': [85, 90, 78, 92, 88], 'Class B': [95, 89, 76, 91, 84, 87]}\n"
            "fig, ax = plt.subplots()\nax.set_title('Scores')\nax.set_xlabel('Class')\n"
            "ax.boxplot(list(data.values()), labels=list(data.keys()))")
        self.assertClean(run)
        chart = charts[0]
        self.assertEqual(chart["type"], "box_and_whisker")
        self.assertEqual([b["label"] for b in chart["elements"]], ["Class A", "Class B"])
        self.assertEqual([b["outliers"] for b in chart["elements"]], [[], [76]])
        self.assertEqual([b["min"] for b in chart["elements"]], [78, 84])
        self.assertEqual([b["median"] for b in chart["elements"]], [88, 88])
        self.assertEqual([b["first_quartile"] for b in chart["elements"]], [85, 84.75])
        self.assertEqual([b["max"] for b in chart["elements"]], [92, 95])

    def test_two_axes_are_a_superchart(self):
        run, charts = chart_of("fig, (a, b) = plt.subplots(1, 2)\nfig.suptitle('Both')\n"
                               "a.plot([1, 2], [3, 4])\nb.bar(['x', 'y'], [1, 2])")
        self.assertClean(run)
        chart = charts[0]
        self.assertEqual(chart["type"], "superchart")
        self.assertEqual(chart["title"], "Both")
        self.assertEqual([c["type"] for c in chart["elements"]], ["line", "bar"])

    def test_an_empty_figure_has_no_chart_and_the_png_stays(self):
        run = run_agent("import matplotlib.pyplot as plt\nplt.figure()\nplt.show()", extra_mimes=E2B)
        self.assertClean(run)
        data = run.one("display")["data"]
        self.assertIn("image/png", data)
        self.assertNotIn("application/vnd.e2b.chart+json", data)

    def test_not_asked_no_chart(self):
        run = run_agent("import matplotlib.pyplot as plt\nplt.bar(['a'], [1])\nplt.show()")
        self.assertClean(run)
        self.assertNotIn("application/vnd.e2b.chart+json", run.one("display")["data"])


if __name__ == "__main__":
    unittest.main()
