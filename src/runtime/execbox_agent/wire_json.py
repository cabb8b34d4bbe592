# JSON for the agent's own wire (the request it reads, the report lines it writes) from the C
# accelerator module alone. The json package imports re (and re enum, functools, collections):
# about 12 ms of a cold run's interpreter start, for code that may never use either. _json's
# scanner and encoder are what json.loads and json.dumps call underneath; only the small
# Python wrappers that build them are redone here. Same results as json's for the shapes the
# agent writes: compact separators, non-ASCII kept, NaN and the infinities refused.
import _json


class _Scanner:
    """The attributes _json.make_scanner reads from its context (json.JSONDecoder's)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    memo = None

    @staticmethod
    def parse_constant(name):
        raise ValueError("%s is not valid JSON" % name)


_scan_once = _json.make_scanner(_Scanner())


def loads(text):
    """A JSON document as Python values; ValueError for anything else (as json's
    JSONDecodeError is)."""
    end = _skip_space(text, 0)
    try:
        value, end = _scan_once(text, end)
    except StopIteration as exc:
        raise ValueError("expecting a JSON value at character %d" % exc.value) from None
    end = _skip_space(text, end)
    if end != len(text):
        raise ValueError("extra data at character %d" % end)
    return value


def _skip_space(text, i):
    while i < len(text) and text[i] in " \t\n\r":
        i += 1
    return i


def _refuse(value):
    raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)


def dumps(value):
    """value as compact JSON text, non-ASCII kept; TypeError for what JSON cannot hold,
    ValueError for NaN, the infinities and circular containers (as json.dumps(value,
    ensure_ascii=False, allow_nan=False, separators=(",", ":")))."""
    if isinstance(value, str):
        return _json.encode_basestring(value)
    encode = _json.make_encoder({}, _refuse, _json.encode_basestring, None, ":", ",", False, False, False)
    return "".join(encode(value, 0))


string = _json.encode_basestring  # a str as a JSON string literal, non-ASCII kept
