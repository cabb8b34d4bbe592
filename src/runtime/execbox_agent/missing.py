# A ModuleNotFoundError for a module the sandbox does not have, said so: models write the
# imports they have seen most, and the bare error sends them to `pip install`, which cannot
# work here (no network). The note names what is installed instead: the usual stand-ins
# for the missing package, then installed modules whose names are close to it.
# Only for a top-level module that no finder knows; a missing submodule of an installed
# package gets no note. The note reaches the traceback through BaseException.add_note
# (Python 3.11 and later), so the error's type and message stay what Python gives.

# What a model usually wants from a package that is absent, among what Debian's scientific
# stack has. A stand-in that is not installed either is left out of the note.
STAND_INS = {
    "polars": ("pandas",), "pyarrow": ("pandas",), "dask": ("pandas",), "modin": ("pandas",),
    "vaex": ("pandas",), "plotly": ("matplotlib", "seaborn"), "bokeh": ("matplotlib", "seaborn"),
    "altair": ("matplotlib", "seaborn"), "cv2": ("PIL", "skimage", "scipy"),
    "skimage": ("PIL", "scipy"), "imageio": ("PIL",), "torch": ("sklearn", "numpy"),
    "tensorflow": ("sklearn", "numpy"), "keras": ("sklearn", "numpy"), "jax": ("numpy",),
    "xgboost": ("sklearn",), "lightgbm": ("sklearn",), "catboost": ("sklearn",),
    "sqlalchemy": ("sqlite3",), "xlrd": ("openpyxl", "pandas"), "tabulate": ("pandas",),
    "statsmodels": ("scipy",), "sklearn": ("scipy", "numpy"),
}
# Packages whose whole purpose is the network, which the sandbox does not have.
NETWORK = {"requests", "httpx", "aiohttp", "urllib3", "boto3", "openai", "anthropic", "selenium"}


def _installed_modules():
    import pkgutil
    return sorted({m.name for m in pkgutil.iter_modules() if not m.name.startswith("_")})


def _wheelhouse_hint(top):
    """What pip can do about it: install from the server's wheelhouse when that has a wheel
    whose name is the module's, else nothing (there is no network)."""
    import os
    from .wheelhouse import WHEELHOUSE
    try:
        wheels = os.listdir(WHEELHOUSE)
    except OSError:
        return " (pip cannot fetch it: there is no network)"
    wanted = top.lower().replace("-", "_")
    for wheel in wheels:
        if wheel.endswith(".whl") and wheel.split("-", 1)[0].lower() == wanted:
            return " (this server's wheelhouse has a wheel of it: `pip install %s` in a command, or the " \
                   "request's packages)" % wheel.split("-", 1)[0]
    return " (pip installs only from this server's wheelhouse, which has no wheel named so; there is no network)"


def missing_module_note(name):
    """The note for a missing top-level module `name`, or None when it exists after all (a
    submodule or a name inside it was what failed)."""
    import importlib.util
    top = (name or "").split(".")[0]
    if not top:
        return None
    try:
        if importlib.util.find_spec(top) is not None:
            return None
    except (ImportError, ValueError):
        pass
    note = "execbox: no module named %r is installed in this sandbox" % top
    if top in NETWORK:
        return note + ", and the sandbox has no network: nothing can be downloaded from here."
    installed = _installed_modules()
    present = set(installed)
    close = [m for m in STAND_INS.get(top, ()) if m in present]
    if len(close) < 3:
        import difflib
        for m in difflib.get_close_matches(top, installed, n=3, cutoff=0.75):
            if m not in close and m != top:
                close.append(m)
    note += _wheelhouse_hint(top)
    if close:
        note += "; installed instead: " + ", ".join(close[:4])
    return note + "."


def add_missing_module_note(exc):
    """Adds the note to a ModuleNotFoundError (never raises: the error report comes first)."""
    try:
        if isinstance(exc, ModuleNotFoundError) and hasattr(exc, "add_note"):
            note = missing_module_note(exc.name)
            if note and note not in getattr(exc, "__notes__", ()):
                exc.add_note(note)
    except Exception:  # noqa: BLE001 - a hint, never a second error
        pass
