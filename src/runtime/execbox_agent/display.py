# Rich representations, as IPython's protocol defines them (_repr_mimebundle_, _repr_html_,
# _repr_png_, ...): the MIME bundles of the result and of display(), which the report carries.
import binascii
import sys

from .cell import format_exception
from .e2b_formats import add_extras
from .text import cap_text

REPR_METHODS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("text/latex", "_repr_latex_"),
    ("application/json", "_repr_json_"),
    ("application/javascript", "_repr_javascript_"),
    ("application/pdf", "_repr_pdf_"),
)
TEXT_LIKE = ("image/svg+xml", "application/javascript")


def _is_json_mime(mime):
    return mime == "application/json" or mime.endswith("+json")


def _real_method(obj, name):
    """The repr method, unless obj is a class or claims every attribute (a Mock, a proxy),
    as IPython checks."""
    if isinstance(obj, type):
        return None
    try:
        if getattr(obj, "_ipython_canary_method_should_not_exist_", None) is not None:
            return None
        method = getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a user __getattr__ may raise anything
        return None
    return method if callable(method) else None


def _json_checked(value):
    import json  # here: the package imports re, ~10 ms of a cold run that may show no JSON
    json.dumps(value, allow_nan=False)  # raises TypeError/ValueError if not plain JSON
    return value


class Formatter:
    """Builds MIME bundles. Anything user code does wrong (a repr method that raises, a value of
    the wrong type, an oversized value) skips that one representation with a note on stderr;
    it never fails the run."""

    def __init__(self, state):
        self._state = state
        self._max_text = state.request["max_repr_bytes"]
        self._max_binary = max(state.request["figures"]["max_bytes"], self._max_text)

    def _warn(self, message, exc=None):
        text = "execbox: %s" % message
        if exc is not None:
            text += ":\n" + "".join(format_exception(exc)).rstrip("\n")
        self._state.warn(text + "\n")

    # For e2b_formats: the same note on stderr, and the cap on a textual value.
    note = _warn

    @property
    def max_text(self):
        return self._max_text

    def convert(self, mime, value, what):
        """A MIME value ready for JSON, or None (skipped, with a note)."""
        try:
            if _is_json_mime(mime):
                import json
                if isinstance(value, (str, bytes)):
                    value = json.loads(value)
                value = _json_checked(value)
                if len(json.dumps(value)) > self._max_text:
                    self._warn("%s is over %d bytes; %s skipped" % (what, self._max_text, mime))
                    return None
                return value
            textual = mime.startswith("text/") or mime in TEXT_LIKE
            if isinstance(value, (bytes, bytearray, memoryview)):
                value = bytes(value)
                if textual:
                    value = value.decode("utf-8", "replace")
                elif len(value) > self._max_binary:
                    self._warn("%s is %d bytes, over %d; %s skipped"
                               % (what, len(value), self._max_binary, mime))
                    return None
                else:
                    return binascii.b2a_base64(value, newline=False).decode("ascii")
            if not isinstance(value, str):
                self._warn("%s returned %s, not str or bytes; %s skipped"
                           % (what, type(value).__name__, mime))
                return None
            if textual:
                return cap_text(value, self._max_text)[0]
            # A binary type given as str is already base64 (IPython's convention).
            if len(value) > self._max_binary * 4 // 3 + 4:
                self._warn("%s is over %d bytes; %s skipped" % (what, self._max_binary, mime))
                return None
            return value
        except Exception as exc:  # noqa: BLE001
            self._warn("%s gave an unusable %s value; skipped" % (what, mime), exc)
            return None

    def merge_metadata(self, metadata, extra, what):
        if not extra:
            return
        try:
            if not isinstance(extra, dict):
                raise TypeError("metadata must be a dict, not %s" % type(extra).__name__)
            metadata.update(_json_checked(dict(extra)))
        except Exception as exc:  # noqa: BLE001
            self._warn("the metadata from %s is not plain JSON; ignored" % what, exc)

    def _call_repr(self, obj, method_name, *args, **kwargs):
        method = _real_method(obj, method_name)
        if method is None:
            return None
        try:
            return method(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001
            self._warn("%s.%s() raised %s; skipped"
                       % (type(obj).__name__, method_name, type(exc).__name__), exc)
            return None

    def bundle(self, obj, include=None, exclude=None):
        """(data, metadata) for obj: _repr_mimebundle_ first, then the _repr_*_ methods for the
        types it did not give, then text/plain from repr()."""
        figure = self._state.figure_class()
        if figure is not None and isinstance(obj, figure):
            try:
                return self._state.figures.bundle(obj)
            except Exception as exc:  # noqa: BLE001
                self._warn("the figure could not be drawn; only its text is shown", exc)
        data, metadata = {}, {}
        name = type(obj).__name__
        result = self._call_repr(obj, "_repr_mimebundle_", include=include, exclude=exclude)
        if isinstance(result, tuple) and len(result) == 2:
            result, extra = result
            self.merge_metadata(metadata, extra, name + "._repr_mimebundle_()")
        if isinstance(result, dict):
            for mime, value in result.items():
                if not isinstance(mime, str):
                    continue
                converted = self.convert(mime, value, name + "._repr_mimebundle_()")
                if converted is not None:
                    data[mime] = converted
        elif result is not None:
            self._warn("%s._repr_mimebundle_() returned %s, not a dict; ignored"
                       % (name, type(result).__name__))
        for mime, method_name in REPR_METHODS:
            if mime in data or (include and mime not in include) or (exclude and mime in exclude):
                continue
            value = self._call_repr(obj, method_name)
            if isinstance(value, tuple) and len(value) == 2:
                value, extra = value
                self.merge_metadata(metadata, {mime: extra} if extra else None, name + "." + method_name)
            if value is not None:
                converted = self.convert(mime, value, "%s.%s()" % (name, method_name))
                if converted is not None:
                    data[mime] = converted
        wants_html = not (include and "text/html" not in include) and not (exclude and "text/html" in exclude)
        if "text/html" not in data and wants_html and self._is_pandas_series(obj):
            # pandas 1.5 gives DataFrame a _repr_html_ but not Series.
            try:
                frame = obj.to_frame()
            except Exception:  # noqa: BLE001
                frame = None
            value = self._call_repr(frame, "_repr_html_") if frame is not None else None
            if value is not None:
                converted = self.convert("text/html", value, name + ".to_frame()._repr_html_()")
                if converted is not None:
                    data["text/html"] = converted
        if "text/plain" not in data:
            data["text/plain"] = self.plain(obj)
        wanted = self._state.request.get("extra_mimes")
        if wanted:
            add_extras(self, obj, data, wanted)
        return data, metadata

    @staticmethod
    def _is_pandas_series(obj):
        pandas = sys.modules.get("pandas")
        series = getattr(pandas, "Series", None)
        return isinstance(series, type) and isinstance(obj, series)

    def plain(self, obj):
        try:
            text = repr(obj)
            if not isinstance(text, str):
                raise TypeError("__repr__ returned non-string (type %s)" % type(text).__name__)
        except BaseException as exc:  # noqa: BLE001 - incl. RecursionError, KeyboardInterrupt
            if isinstance(exc, (SystemExit, KeyboardInterrupt)):
                raise
            self._warn("repr() of a %s object raised %s; using the default repr"
                       % (type(obj).__name__, type(exc).__name__), exc)
            text = object.__repr__(obj)
        return cap_text(text, self._max_text)[0]

    def raw_bundle(self, obj):
        """display(raw=True): obj is already a {mime: value} dict."""
        if not isinstance(obj, dict):
            raise TypeError("display(raw=True) takes dicts of MIME type to value, not %s"
                            % type(obj).__name__)
        data = {}
        for mime, value in obj.items():
            if not isinstance(mime, str):
                raise TypeError("MIME types must be str, not %s" % type(mime).__name__)
            converted = self.convert(mime, value, "display(raw=True)")
            if converted is not None:
                data[mime] = converted
        if "text/plain" not in data:
            data["text/plain"] = "<%s>" % ", ".join(sorted(data)) if data else ""
        return data, {}


def make_display(current_state):
    def display(*objs, include=None, exclude=None, metadata=None, transient=None,
                display_id=None, raw=False, clear=False, **kwargs):
        """Show each object as a rich output (IPython's display()): one display output per
        object, in order, with text/plain and any richer representations it has."""
        state = current_state()
        for obj in objs:
            if raw:
                data, md = state.formatter.raw_bundle(obj)
            else:
                data, md = state.formatter.bundle(obj, include, exclude)
            if metadata:
                state.formatter.merge_metadata(md, metadata, "display(metadata=...)")
            state.reporter.emit({"type": "display", "data": data, "metadata": md})

    return display
