# matplotlib: Agg only; pyplot.show() and figures left open become image/png displays. The
# agent never imports matplotlib itself: a hook patches pyplot when the user's code imports it
# (or at once when a zygote preloaded it).
import binascii
import io
import os
import sys

from .cell import format_exception
from .import_hook import AfterImportHook

def _png_size(png):
    if png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR":
        return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    return 0, 0


class Figures:
    def __init__(self, state):
        self._state = state
        self._limits = state.request["figures"]
        self._displayed = []  # figures shown by display() or as the result: not shown again

    @staticmethod
    def _pyplot():
        return sys.modules.get("matplotlib.pyplot")

    def _render(self, fig, dpi):
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
        return buf.getvalue()

    def png(self, fig):
        """(png bytes or None, metadata). A figure over the pixel caps is rendered at a lower dpi
        so it fits; a PNG over the byte cap is rendered smaller until it fits. Either way the
        metadata says so, with the size it would have had."""
        limits = self._limits
        max_w, max_h, max_bytes = limits["max_width_px"], limits["max_height_px"], limits["max_bytes"]
        target = float(limits["dpi"] or fig.dpi)
        w_in, h_in = (float(v) for v in fig.get_size_inches())
        full_w, full_h = max(round(w_in * target), 1), max(round(h_in * target), 1)
        dpi = target * min(1.0, max_w / full_w, max_h / full_h)
        original = {"original_width": full_w, "original_height": full_h}
        reason = "it cannot be rendered within the caps"
        for _ in range(8):
            if dpi * max(w_in, h_in) < 16 or dpi * min(w_in, h_in) < 1:
                reason = "it cannot be rendered small enough to fit the caps"
                break
            png = self._render(fig, dpi)
            width, height = _png_size(png)
            if width > max_w or height > max_h:  # e.g. rcParams['savefig.bbox'] = 'tight'
                dpi *= min(max_w / width, max_h / height) * 0.99
                continue
            if len(png) > max_bytes:
                reason = "its PNG is over %d bytes even when rendered smaller" % max_bytes
                dpi *= min(0.9, max(0.25, (max_bytes / len(png)) ** 0.5 * 0.95))
                continue
            metadata = {"width": width, "height": height}
            if dpi < target * 0.999:
                metadata.update({"downscaled": True}, **original)
            return png, metadata
        return None, dict({"omitted": True, "reason": reason}, **original)

    def bundle(self, fig):
        self._displayed.append(fig)
        return self._figure_bundle(fig)

    def show_one(self, fig):
        data, metadata = self.bundle(fig)
        self._state.reporter.emit({"type": "display", "data": data, "metadata": metadata})

    def _figure_bundle(self, fig):
        formatter = self._state.formatter
        plain = formatter.plain(fig)
        png, metadata = self.png(fig)
        if png is None:
            return {"text/plain": "%s (not shown: %s)" % (plain, metadata["reason"])}, metadata
        data = {"image/png": binascii.b2a_base64(png, newline=False).decode("ascii"), "text/plain": plain}
        if "application/vnd.e2b.chart+json" in self._state.request.get("extra_mimes", ()):
            from .e2b_formats import add_chart  # here: it imports re and datetime (charts.py)
            add_chart(formatter, fig, data)  # after drawing: the tick labels are known then
        return data, metadata

    def _open_figures(self):
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is None:
            return []
        managers = sorted(helpers.Gcf.get_all_fig_managers(), key=lambda m: m.num)
        return [m.canvas.figure for m in managers]

    def show(self):
        """pyplot.show(): every open figure becomes a display, then all are closed. A figure that
        fails to draw raises into the user's code, as it would in a notebook."""
        figures = self._open_figures()
        try:
            for fig in figures:
                data, metadata = self._figure_bundle(fig)
                self._state.reporter.emit({"type": "display", "data": data, "metadata": metadata})
        finally:
            self._close(figures)

    def flush_leftovers(self):
        """At the end: figures the code never showed are emitted too (a model that forgets
        show() still gets its plot). A failure is a note on stderr, not an error of the run."""
        figures = self._open_figures()
        for fig in figures:
            if any(fig is shown for shown in self._displayed):
                continue
            try:
                data, metadata = self._figure_bundle(fig)
            except Exception as exc:  # noqa: BLE001
                self._state.warn("execbox: a figure could not be drawn:\n%s" % "".join(format_exception(exc)))
                data = {"text/plain": "%s (not shown: drawing it raised %s)" % (
                    self._state.formatter.plain(fig), type(exc).__name__)}
                metadata = {"omitted": True, "reason": "drawing it raised %s" % type(exc).__name__}
            self._state.reporter.emit({"type": "display", "data": data, "metadata": metadata})
        self._close(figures)

    def _close(self, figures):
        pyplot = self._pyplot()
        if pyplot is not None:
            for fig in figures:
                try:
                    pyplot.close(fig)
                except Exception:  # noqa: BLE001
                    pass


# The Figures of the execution that is running: patched show() methods look it up, so that
# in a warm session they serve the current execution, not the one that patched them.
_current_figures = None


def patch_pyplot(pyplot, figures):
    global _current_figures
    _current_figures = figures
    if getattr(pyplot.show, "_execbox", False):
        return
    original = pyplot.show

    def show(*args, **kwargs):
        """Display all open figures (execbox: each becomes an image/png display output) and
        close them."""
        _current_figures.show()

    show._execbox = True
    show.__wrapped__ = original
    pyplot.show = show
    axes_class = getattr(sys.modules.get("matplotlib.axes"), "Axes", None)
    if axes_class is not None:
        from .charts import patch_boxplots  # only with matplotlib: it imports re and datetime
        patch_boxplots(axes_class)  # for charts.py's box_and_whisker
    # Figure.show() only warns on Agg ("non-interactive"); here it shows that one figure.
    figure_class = getattr(sys.modules.get("matplotlib.figure"), "Figure", None)
    if figure_class is not None and not getattr(figure_class.show, "_execbox", False):
        def figure_show(self, warn=True):
            """Show the figure (execbox: as an image/png display output)."""
            _current_figures.show_one(self)

        figure_show._execbox = True
        figure_class.show = figure_show


class PyplotHook(AfterImportHook):
    """matplotlib.pyplot's import, followed: show() is patched right after the module runs, so
    that matplotlib is never imported unless the user's code imports it."""

    def __init__(self, figures):
        super().__init__("matplotlib.pyplot", lambda module: patch_pyplot(module, figures))


# A font list built once by the host (runtime/font_cache.cc); without it matplotlib rebuilds
# it on every first import, ~200-300 ms of each run that plots.
MATPLOTLIB_SEED = "/opt/execbox/matplotlib"


def seed_matplotlib_cache():
    target = os.environ.get("MPLCONFIGDIR")
    if not target or not os.path.isdir(MATPLOTLIB_SEED):
        return
    try:
        os.makedirs(target, exist_ok=True)
        for name in os.listdir(MATPLOTLIB_SEED):
            with open(os.path.join(MATPLOTLIB_SEED, name), "rb") as src:
                data = src.read()
            with open(os.path.join(target, name), "wb") as dst:
                dst.write(data)
    except OSError:
        pass  # matplotlib builds its own


def warm_plot(pyplot):
    """One small line plot with text, rendered to an in-memory PNG and closed."""
    fig = pyplot.figure(figsize=(2, 1.5), dpi=72)
    ax = fig.add_subplot()
    ax.plot([0, 1, 2], [0, 1, 0], label="warm-up")
    ax.set_title("warm-up")
    ax.legend()
    fig.savefig(io.BytesIO(), format="png")
    pyplot.close(fig)
