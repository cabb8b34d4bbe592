# One module's import, followed: a sys.meta_path finder that acts on that name only, finds the
# real spec through the other finders and wraps its loader so that `after(module)` runs once
# the module has run. The agent patches matplotlib.pyplot this way (figures.py) and fills
# linecache's cache (cell.py), so that neither is imported before the code asks for it.
import sys


class AfterImportHook:
    def __init__(self, name, after):
        self._name = name
        self._after = after

    def find_spec(self, name, path=None, target=None):
        if name != self._name:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _AfterLoader(spec.loader, self._after)
                return spec
        return None

    def invalidate_caches(self):
        pass


class _AfterLoader:
    """The real loader (get_source for tracebacks, ...), with `after` run past exec_module."""

    def __init__(self, loader, after):
        self._loader = loader
        self._after = after

    def __getattr__(self, name):
        return getattr(self._loader, name)

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        self._after(module)
