# Installs from the operator's wheelhouse, never the network (docs/packages.md "Packages"). The host
# binds its [packages] wheelhouse directory read-only at WHEELHOUSE. Packages go into the work
# dir's user base (PYTHONUSERBASE, under a name the file collection skips), so a session keeps
# them from one execution to the next, and its snapshots, forks and exports carry them; they
# count against the work dir's size like any file the code writes.
#
# One install, whoever asks (a request's "packages", `pip install` in the sandbox's shell):
#   1. each name is checked: a distribution name with an optional version, nothing else (no
#      path, URL or option reaches pip);
#   2. pip resolves it against the wheelhouse alone (--dry-run --report): what it would install;
#   3. each wheel it chose must lie inside the wheelhouse, fit in the work dir's free space,
#      and, when the wheelhouse carries a requirements.txt with --hash pins, match one of them;
#   4. pip installs exactly those files (--no-deps: step 2 resolved the dependencies);
#   5. every top-level module of every installed distribution must import; if one does not,
#      what this install added is removed again and the install fails.
# Only then is the install reported done. Imports here are lazy: execution.py calls
# activate() in every execution, and it must cost one stat.
#
# A one-shot execution's packages may come ready-made instead (use_set): the host builds a
# package set once per list of names and wheelhouse content, by this same install in a run of
# its own with no user code (engine/package_sets.h), and binds the sets read-only at SETS.
import os
import sys

WHEELHOUSE = "/opt/execbox/wheels"
HASHES_FILE = "requirements.txt"
INTERPRETER = "/usr/bin/python3"
MAX_PACKAGES = 32
SETS = "/opt/execbox/package-sets/"
MANIFEST = "manifest.json"


class PackageInstallError(Exception):
    """An install refused or failed; the message is for the user."""


PackageInstallError.__module__ = "builtins"  # its traceback line reads as Python's own errors do


def user_base():
    return os.environ.get("PYTHONUSERBASE") or "/home/user/.execbox-packages"


def site_dir(base=None):
    return os.path.join(base or user_base(), "lib", "python%d.%d" % sys.version_info[:2], "site-packages")


def activate(path=None):
    """Puts the user base's site-packages (or `path`) on sys.path, ahead of the system's, once it
    exists."""
    path = path or site_dir()
    if path in sys.path or not os.path.isdir(path):
        return
    import importlib
    import site
    before = list(sys.path)
    site.addsitedir(path)  # its .pth files too
    added = [p for p in sys.path if p not in before]
    rest = [p for p in sys.path if p not in added]
    at = next((i for i, p in enumerate(rest) if "dist-packages" in p), len(rest))
    sys.path[:] = rest[:at] + added + rest[at:]
    importlib.invalidate_caches()


def _normalize(name):
    import re
    return re.sub(r"[-_.]+", "-", name).lower()


def check_spec(spec):
    """A distribution name, optionally with extras and version clauses ("tqdm", "a-b==1.2",
    "x>=1,<2"): the only thing a caller's text may put on pip's command line."""
    import re
    if not isinstance(spec, str) or not re.fullmatch(
            r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?(?:\[[A-Za-z0-9._,-]{1,100}\])?"
            r"(?:(?:===?|[<>!~]=|[<>])[A-Za-z0-9.*+!-]{1,64}"
            r"(?:,(?:===?|[<>!~]=|[<>])[A-Za-z0-9.*+!-]{1,64}){0,3})?", spec):
        shown = spec if isinstance(spec, str) and len(spec) <= 100 else "that"
        raise PackageInstallError("%r is not a package name (a name, optionally with a version such as "
                           "name==1.2, and nothing else: no path, URL or option)" % shown)
    return spec


def _pins():
    """{normalized name: {sha256 hex}} from the wheelhouse's requirements.txt, or None when it
    has none or pins no hash."""
    import re
    try:
        with open(os.path.join(WHEELHOUSE, HASHES_FILE), encoding="utf-8", errors="replace") as f:
            text = f.read(4 << 20)
    except OSError:
        return None
    pins = {}
    for line in text.replace("\\\n", " ").splitlines():
        line = line.split("#", 1)[0].strip()
        hashes = re.findall(r"--hash[= ]sha256:([0-9a-fA-F]{64})", line)
        name = re.match(r"[A-Za-z0-9._-]+", line)
        if hashes and name:
            pins.setdefault(_normalize(name.group(0)), set()).update(h.lower() for h in hashes)
    return pins or None


def _pip_env():
    env = dict(os.environ)
    env.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELHOUSE, "PIP_USER": "1",
                "PIP_BREAK_SYSTEM_PACKAGES": "1", "PIP_ONLY_BINARY": ":all:",
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_CACHE_DIR": "1",
                "PIP_NO_INPUT": "1", "PIP_PROGRESS_BAR": "off"})
    env.pop("PIP_CONSTRAINT", None)
    env.pop("PIP_REQUIREMENT", None)
    return env


def _pip(args):
    """Runs pip; returns its output, or raises PackageInstallError with its ERROR lines."""
    import subprocess
    done = subprocess.run([INTERPRETER, "-m", "pip"] + args, env=_pip_env(), stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    if done.returncode != 0:
        lines = [ln[len("ERROR: "):] for ln in done.stderr.splitlines() if ln.startswith("ERROR: ")]
        if not lines:
            lines = [ln for ln in done.stderr.splitlines() if ln.strip()][-3:] or ["pip failed"]
        raise PackageInstallError("; ".join(lines)[:2000])
    return done.stdout


def _resolve(specs):
    """What pip would install for `specs` from the wheelhouse: [(name, version, path)]."""
    import json
    import tempfile
    with tempfile.TemporaryDirectory(prefix="execbox-pip-") as scratch:
        report = os.path.join(scratch, "report.json")
        try:
            _pip(["install", "--dry-run", "--quiet", "--report", report] + specs)
        except PackageInstallError as exc:
            import re
            missing = re.findall(r"No matching distribution found for (\S+)", str(exc))
            if missing:
                raise PackageInstallError(
                    "the wheelhouse has no wheel for %s (and the sandbox has no network); GET /v1/packages lists "
                    "what is installed already" % ", ".join(missing)) from None
            raise
        with open(report, encoding="utf-8") as f:
            items = json.load(f).get("install", [])
    from urllib.parse import unquote, urlsplit
    chosen = []
    house = os.path.realpath(WHEELHOUSE) + "/"
    for item in items:
        meta, url = item.get("metadata", {}), item.get("download_info", {}).get("url", "")
        name, version = meta.get("name", "?"), meta.get("version", "?")
        parts = urlsplit(url)
        path = os.path.realpath(unquote(parts.path)) if parts.scheme == "file" else ""
        if not path.startswith(house) or not path.endswith(".whl"):
            raise PackageInstallError("refused %s %s: it does not come from a wheel in the wheelhouse" % (name, version))
        chosen.append((name, version, path))
    return chosen


def _check_wheels(chosen):
    """Each wheel fits in the work dir, and matches its pin when the wheelhouse has pins."""
    import hashlib
    import zipfile
    pins = _pins()
    base = user_base()  # in the work dir (whatever this execution's HOME), or a set being built
    st = os.statvfs(base if os.path.isdir(base) else os.path.dirname(base))
    free = st.f_bavail * st.f_frsize
    cap = os.environ.get("EXECBOX_INSTALL_MAX_BYTES", "")  # a set: as much as a work dir would hold
    if cap.isdigit():
        free = min(free, int(cap))
    most_files = os.environ.get("EXECBOX_INSTALL_MAX_FILES", "")  # a set, on the host's disk
    needed = files = 0
    for name, version, path in chosen:
        try:
            with zipfile.ZipFile(path) as wheel:
                members = wheel.infolist()
                needed += sum(i.file_size for i in members)
                files += len(members)
        except (OSError, zipfile.BadZipFile) as exc:
            raise PackageInstallError("the wheel of %s %s is not a readable wheel (%s)" % (name, version, exc)) from None
        if pins is not None:
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            wanted = pins.get(_normalize(name))
            if wanted is None:
                raise PackageInstallError("refused %s %s: the wheelhouse's %s pins no hash for it"
                                   % (name, version, HASHES_FILE))
            if digest.hexdigest() not in wanted:
                raise PackageInstallError("refused %s %s: its wheel's sha256 matches none of the hashes pinned in "
                                   "the wheelhouse's %s" % (name, version, HASHES_FILE))
    if most_files.isdigit() and files > int(most_files):
        raise PackageInstallError("refused: the wheels hold %d files, more than the %s a package set may hold"
                                  % (files, most_files))
    if needed > free:
        raise PackageInstallError("refused: the wheels unpack to %.1f MB, more than the %.1f MB free in the work dir "
                           "(the disk limit)" % (needed / 1e6, free / 1e6))


def _top_level(name):
    """The importable top-level modules the installed distribution `name` provides."""
    import importlib.metadata as md
    for dist in md.distributions(path=[site_dir()]):
        if _normalize(dist.metadata["Name"] or "") != _normalize(name):
            continue
        top = (dist.read_text("top_level.txt") or "").split()
        if not top:
            for f in dist.files or []:
                first = f.parts[0] if f.parts else ""
                if first and first != ".." and not first.endswith((".dist-info", ".pth")):
                    top.append(first[:-3] if first.endswith(".py") else first)
        return sorted({m for m in top if m.isidentifier() and not m.startswith("_")})
    return []


def _entries(path):
    try:
        return set(os.listdir(path))
    except OSError:
        return set()


def _remove_added(before):
    import shutil
    path = site_dir()
    for entry in _entries(path) - before:
        full = os.path.join(path, entry)
        if os.path.isdir(full) and not os.path.islink(full):
            shutil.rmtree(full, ignore_errors=True)
        else:
            try:
                os.unlink(full)
            except OSError:
                pass


def _import_here(modules):
    import importlib
    activate()
    importlib.invalidate_caches()
    for module in modules:
        importlib.import_module(module)


def _import_apart(modules):
    import subprocess
    done = subprocess.run([INTERPRETER, "-c", "import " + ", ".join(modules)], stdin=subprocess.DEVNULL,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace")
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        raise ImportError(lines[-1] if lines else "exit status %d" % done.returncode)


def install(specs, in_process=True):
    """Installs `specs` (names, optionally versioned) from the wheelhouse into the user base.
    Returns [{"name", "version", "modules"}] of what was installed ([] when everything was
    there already). The modules are imported before this returns: here when in_process, else in
    a fresh interpreter. Raises PackageInstallError saying why not."""
    if not isinstance(specs, list) or not specs:
        raise PackageInstallError("packages must be a non-empty list of names")
    if len(specs) > MAX_PACKAGES:
        raise PackageInstallError("at most %d packages per install" % MAX_PACKAGES)
    specs = [check_spec(s) for s in specs]
    if not os.path.isdir(WHEELHOUSE):
        raise PackageInstallError("this server has no wheelhouse ([packages] wheelhouse in its configuration) and the "
                           "sandbox has no network: nothing can be installed")
    chosen = _resolve(specs)
    if not chosen:
        return []
    _check_wheels(chosen)
    before = _entries(site_dir())
    modules = []
    try:
        _pip(["install", "--no-deps", "--quiet", "--no-compile"] + [path for _, _, path in chosen])
        installed = [{"name": n, "version": v, "modules": _top_level(n)} for n, v, _ in chosen]
        modules = [m for p in installed for m in p["modules"]]
        try:
            (_import_here if in_process else _import_apart)(modules)
        except BaseException as exc:  # noqa: BLE001 - whatever the package's import raises
            raise PackageInstallError("installed %s, but it does not import: %s: %s" % (
                ", ".join("%s %s" % (p["name"], p["version"]) for p in installed), type(exc).__name__,
                exc)) from None
    except BaseException:
        _remove_added(before)
        if in_process:  # what the failed import left behind goes too
            import importlib
            for name in [k for k in sys.modules if k.split(".")[0] in modules]:
                del sys.modules[name]
            importlib.invalidate_caches()
        raise
    return installed


def use_set(path):
    """Takes the packages of the package set at `path` (built by the host with exactly this
    request's packages): its site-packages goes on sys.path, read-only, and its modules are
    imported here, as install() would have. Returns what the set installed, as install() does,
    or None when there is no such set (the host removed it meanwhile: install as usual)."""
    import json
    if not isinstance(path, str) or not path.startswith(SETS) or "/." in path:
        return None
    try:
        with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
            installed = json.load(f)["installed"]
        modules = [m for p in installed for m in p["modules"]]
        if not all(isinstance(m, str) for m in modules):
            return None
    except (OSError, ValueError, LookupError, TypeError):
        return None
    activate(site_dir(path))
    try:
        _import_here(modules)
    except BaseException as exc:  # noqa: BLE001 - whatever the package's import raises
        raise PackageInstallError("%s does not import: %s: %s" % (
            ", ".join("%s %s" % (p["name"], p["version"]) for p in installed), type(exc).__name__, exc)) from None
    return installed


USAGE = """usage: pip install NAME[==VERSION] ... | pip install -r FILE
In this sandbox pip installs from the server's wheelhouse, into the work dir; other pip commands
(list, show, freeze) run as usual. Under a network policy, an install that names an index
(--index-url, --extra-index-url, PIP_INDEX_URL) is pip's own, through the server's proxy.
"""


def _names_an_index(args):
    """Whether an install's arguments or environment name a package index."""
    if os.environ.get("PIP_INDEX_URL") or os.environ.get("PIP_EXTRA_INDEX_URL"):
        return True
    return any(a in ("-i", "--index-url", "--extra-index-url") or a.startswith(("--index-url=", "--extra-index-url="))
               for a in args)


def _install_args(args):
    specs = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-q", "--quiet", "-U", "--upgrade", "--user", "--no-cache-dir", "--no-input",
                   "--disable-pip-version-check", "--break-system-packages", "-v", "--verbose"):
            pass
        elif arg in ("-r", "--requirement") and i + 1 < len(args):
            i += 1
            with open(args[i], encoding="utf-8", errors="replace") as f:
                for line in f.read(1 << 20).splitlines():
                    line = line.split("#", 1)[0].strip()
                    if line:
                        specs.append(line)
        elif arg.startswith("-"):
            raise PackageInstallError("option %s is not supported here: pip installs only from the server's "
                               "wheelhouse" % arg)
        else:
            specs.append(arg)
        i += 1
    return specs


def main(argv):
    """`pip` in the sandbox (/opt/execbox/bin/pip): install goes through install(); the other
    commands are pip's own."""
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(USAGE)
        return 0
    if argv[0] != "install":
        os.execve(INTERPRETER, [INTERPRETER, "-m", "pip"] + argv, _pip_env())
    # A sandbox with a network policy has no PIP_NO_INDEX (python_program.cc): an index the
    # caller names is reached through the proxy, which decides; wheels only, into the work dir,
    # as pip's environment here says (PIP_USER, PIP_ONLY_BINARY).
    if "PIP_NO_INDEX" not in os.environ and _names_an_index(argv[1:]):
        os.execve(INTERPRETER, [INTERPRETER, "-m", "pip"] + argv, dict(os.environ))
    try:
        installed = install(_install_args(argv[1:]), in_process=False)
    except (PackageInstallError, OSError) as exc:
        sys.stderr.write("ERROR: %s\n" % exc)
        return 1
    if installed:
        print("Successfully installed " + " ".join("%s-%s" % (p["name"], p["version"]) for p in installed))
    else:
        print("Requirement already satisfied: everything asked for is installed")
    return 0
