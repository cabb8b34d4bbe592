# What a matplotlib figure plots, in the shape E2B's SDKs type as a Chart (our
# application/vnd.e2b.chart+json, E2B's e2b/chart): per axes a line, scatter, bar, pie or
# box_and_whisker chart with its elements, titles, labels, units, scales and ticks; a figure of
# several such axes is a superchart of them. Read from the figure's artists after it is drawn
# (tick labels exist then); box plots from the statistics Axes.bxp was given (patch_boxplots),
# which its drawn lines only approximate.
import datetime
import re

ROUND_DIGITS = 10  # enough for any plotted value, and 36.000000000000004 reads as 36
ANGLE_DIGITS = 4  # a wedge's angles are float32 in matplotlib: 323.9999914 is 324
_UNIT = re.compile(r"[(\[]([^()\[\]]+)[)\]]\s*$")  # "Time (s)" -> s, "Length [m]" -> m


def figure_chart(fig):
    """The chart of a figure, or None when no axes plots anything this knows."""
    charts = [c for c in (axes_chart(ax) for ax in fig.get_axes() if ax.get_visible()) if c]
    if not charts:
        return None
    if len(charts) == 1:
        return charts[0]
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    return {"type": "superchart", "title": title or None, "elements": charts}


def axes_chart(ax):
    import matplotlib.collections as collections
    import matplotlib.container as container
    import matplotlib.patches as patches

    boxes = getattr(ax, "_execbox_boxes", None)
    if boxes:
        return _with_axes(ax, {"type": "box_and_whisker", "elements": boxes})
    wedges = [p for p in ax.patches if isinstance(p, patches.Wedge)]
    if wedges:
        return {"type": "pie", "title": ax.get_title() or None, "elements": [_wedge(w) for w in wedges]}
    bars = [c for c in ax.containers if isinstance(c, container.BarContainer)]
    if bars:
        return _with_axes(ax, {"type": "bar", "elements": [e for c in bars for e in _bars(ax, c)]})
    lines = [line for line in ax.get_lines() if line.get_visible() and len(line.get_xdata(orig=True))]
    if lines:
        elements = [_points(ax, _label(line), line.get_xdata(orig=True), line.get_ydata(orig=True))
                    for line in lines]
        return _with_ticks(ax, {"type": "line", "elements": elements})
    dots = [c for c in ax.collections if isinstance(c, collections.PathCollection) and len(c.get_offsets())]
    if dots:
        elements = []
        for dot in dots:
            offsets = dot.get_offsets()
            xs = _from_axis(ax.xaxis, [row[0] for row in offsets])
            ys = _from_axis(ax.yaxis, [row[1] for row in offsets])
            elements.append({"label": _label(dot), "points": [[x, y] for x, y in zip(xs, ys)]})
        return _with_ticks(ax, {"type": "scatter", "elements": elements})
    return None


def _with_axes(ax, chart):
    x_label, y_label = ax.get_xlabel(), ax.get_ylabel()
    chart.update({"title": ax.get_title() or None, "x_label": x_label or None, "y_label": y_label or None,
                  "x_unit": _unit(x_label), "y_unit": _unit(y_label)})
    return chart


def _with_ticks(ax, chart):
    _with_axes(ax, chart)
    for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
        scale = _scale(ax, axis)
        ticks = list(axis.get_majorticklocs())
        chart[name + "_scale"] = scale
        chart[name + "_ticks"] = _from_axis(axis, ticks) if scale == "datetime" else [_number(t) for t in ticks]
        chart[name + "_tick_labels"] = [t.get_text() for t in axis.get_majorticklabels()]
    return chart


def _unit(label):
    match = _UNIT.search(label or "")
    return match.group(1).strip() if match else None


def _label(artist):
    label = artist.get_label() or ""
    return "" if label.startswith("_") else label  # matplotlib's own names (_child0, _nolegend_)


def _number(value, digits=ROUND_DIGITS):
    value = float(value)
    if value != value or value in (float("inf"), float("-inf")):
        return None
    rounded = round(value, digits)
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


def _is_dates(axis):
    import matplotlib.dates as dates

    formatter = axis.get_major_formatter()
    return isinstance(formatter, (dates.DateFormatter, dates.AutoDateFormatter, dates.ConciseDateFormatter))


def _is_categories(axis):
    import matplotlib.category as category

    return isinstance(axis.get_major_formatter(), category.StrCategoryFormatter)


def _scale(ax, axis):
    if _is_dates(axis):
        return "datetime"
    if _is_categories(axis):
        return "categorical"
    return axis.get_scale()


def _from_axis(axis, values):
    """Plotted values (axis units: numbers) as the caller gave them: dates in ISO 8601,
    categories by name, numbers as numbers."""
    if _is_dates(axis):
        import matplotlib.dates as dates

        return [dates.num2date(float(v)).replace(tzinfo=None).isoformat() for v in values]
    return [_plain(v) for v in values]


def _plain(value):
    if isinstance(value, str):
        return value
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    try:
        return _number(value)
    except (TypeError, ValueError):
        return str(value)


def _points(ax, label, xs, ys):
    import matplotlib.dates as dates

    def column(axis, values):
        values = list(values)
        if _is_dates(axis) and values and not isinstance(values[0], (datetime.date, str)):
            try:  # numpy datetime64 and the like
                values = [dates.num2date(dates.date2num(v)).replace(tzinfo=None) for v in values]
            except Exception:  # noqa: BLE001
                pass
        return [_plain(v) for v in values]

    return {"label": label, "points": [[x, y] for x, y in zip(column(ax.xaxis, xs), column(ax.yaxis, ys))]}


def _wedge(wedge):
    return {"label": _label(wedge), "angle": _number(abs(wedge.theta2 - wedge.theta1), ANGLE_DIGITS),
            "radius": _number(wedge.r, ANGLE_DIGITS)}


def _bars(ax, bars):
    """One element per bar: its value, the category (tick label) it stands at, and its series
    (the container's label)."""
    horizontal = getattr(bars, "orientation", "vertical") == "horizontal"
    axis = ax.yaxis if horizontal else ax.xaxis
    ticks = list(axis.get_majorticklocs())
    names = [t.get_text() for t in axis.get_majorticklabels()]
    group = _label(bars)
    elements = []
    for bar in bars.patches:
        if horizontal:
            at, value = bar.get_y() + bar.get_height() / 2, bar.get_width()
        else:
            at, value = bar.get_x() + bar.get_width() / 2, bar.get_height()
        label = None
        if ticks and len(names) == len(ticks):
            nearest = min(range(len(ticks)), key=lambda i: abs(ticks[i] - at))
            if abs(ticks[nearest] - at) < 0.5 * max(abs(bar.get_height() if horizontal else bar.get_width()), 1e-12):
                label = names[nearest]
        elements.append({"label": label if label is not None else str(_number(at)), "value": _number(value),
                         "group": group})
    return elements


def patch_boxplots(axes_class):
    """Axes.bxp records the statistics it draws on the axes (box_and_whisker charts use them)."""
    if getattr(axes_class.bxp, "_execbox", False):
        return
    original = axes_class.bxp

    def bxp(self, bxpstats, *args, **kwargs):
        artists = original(self, bxpstats, *args, **kwargs)
        try:
            boxes = getattr(self, "_execbox_boxes", None) or []
            for i, stats in enumerate(bxpstats):
                boxes.append({
                    "label": str(stats.get("label", len(boxes) + 1)),
                    "min": _number(stats["whislo"]), "first_quartile": _number(stats["q1"]),
                    "median": _number(stats["med"]), "third_quartile": _number(stats["q3"]),
                    "max": _number(stats["whishi"]),
                    "outliers": [_number(v) for v in stats.get("fliers", [])],
                })
            self._execbox_boxes = boxes
        except Exception:  # noqa: BLE001 - the plot stands; only its chart is missing
            pass
        return artists

    bxp._execbox = True
    bxp.__wrapped__ = original
    bxp.__doc__ = original.__doc__
    axes_class.bxp = bxp
