# The representations E2B's code interpreter adds to IPython's, given only when the request
# asks for them ("extra_mimes", request.py; the E2B front end does): a DataFrame's columns as
# lists (application/vnd.e2b.data+json, E2B's e2b/data), what a matplotlib figure plots
# (application/vnd.e2b.chart+json, E2B's e2b/chart; charts.py), and application/json of a list
# or dict. JSON types, so that the host keeps them as JSON values (engine/report.cc). E2B's
# SDKs read them as `data`, `chart` and `json`.
import math
import sys

# json and datetime are imported where used: these run only when a request asks for E2B's
# extras, and the json package imports re (~10 ms of a cold run's start).


def plain_value(value):
    """One cell of a DataFrame as a JSON value: numpy scalars as Python's, NaN and the
    infinities as null (JSON has neither), dates and times in ISO 8601, anything else as its
    str()."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item) and type(value).__module__ == "numpy":
        try:
            return plain_value(item())
        except Exception:  # noqa: BLE001 - a numpy type without a Python twin
            return str(value)
    pandas = sys.modules.get("pandas")
    if pandas is not None and value is getattr(pandas, "NaT", object()):
        return None  # a datetime too, whose isoformat() is "NaT"
    import datetime
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()  # pandas.Timestamp is a datetime
    return str(value)


def frame_data(obj):
    """The columns of a DataFrame, {column: [values]}, or None for anything else."""
    pandas = sys.modules.get("pandas")
    frame = getattr(pandas, "DataFrame", None)
    if not isinstance(frame, type) or not isinstance(obj, frame):
        return None
    return {str(k): [plain_value(v) for v in column] for k, column in obj.to_dict(orient="list").items()}


def container_json(obj):
    """application/json of a list or dict that JSON can hold as it is, else None."""
    if not isinstance(obj, (list, dict)):
        return None
    import json
    try:
        json.dumps(obj, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return obj


def add_extras(formatter, obj, data, wanted):
    """Adds the asked-for representations of obj to data (a MIME bundle). One that fails or is
    over the size cap is left out, as any representation is (Formatter.convert)."""
    if "application/vnd.e2b.data+json" in wanted:
        _add(formatter, data, "application/vnd.e2b.data+json", lambda: frame_data(obj))
    if "application/json" in wanted and "application/json" not in data:
        _add(formatter, data, "application/json", lambda: container_json(obj))


def add_chart(formatter, fig, data):
    from .charts import figure_chart

    _add(formatter, data, "application/vnd.e2b.chart+json", lambda: figure_chart(fig))


def _add(formatter, data, mime, make):
    try:
        value = make()
    except Exception as exc:  # noqa: BLE001 - user objects may fail in any way
        formatter.note("%s could not be made; left out" % mime, exc)
        return
    if value is None:
        return
    import json
    try:
        size = len(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError) as exc:
        formatter.note("%s is not plain JSON; left out" % mime, exc)
        return
    if size > formatter.max_text:
        formatter.note("%s is over %d bytes; left out" % (mime, formatter.max_text))
        return
    data[mime] = value
