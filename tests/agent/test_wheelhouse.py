"""The agent's side of installs from the wheelhouse (execbox_agent/wheelhouse.py), the parts that
need no sandbox: which names reach pip, how the wheelhouse's hash pins are read, what the
sandbox's `pip install` takes, where installed packages go on sys.path, and the missing-module
note when a wheelhouse has the module. The installs themselves run end to end in
tests/http/test_packages.py."""
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "src", "runtime"))

from execbox_agent import missing, wheelhouse  # noqa: E402
from execbox_agent.wheelhouse import PackageInstallError  # noqa: E402


class SpecTest(unittest.TestCase):
    def test_names_with_versions_pass(self):
        for spec in ("tqdm", "python-docx", "zope.interface", "x==1.2", "x>=1,<2", "pkg[extra]==1.0", "z~=2.1"):
            self.assertEqual(wheelhouse.check_spec(spec), spec)

    def test_paths_urls_options_and_markers_do_not(self):
        for spec in ("", "../x", "/var/tmp/x.whl", "./x.whl", "-r", "--index-url=http://x", "x @ file:///etc",
                     "a b", "x; python_version>'3'", "http://pypi.org/x", "x" * 101, 3, None):
            with self.assertRaises(PackageInstallError, msg=repr(spec)) as caught:
                wheelhouse.check_spec(spec)
            self.assertIn("is not a package name", str(caught.exception))

    def test_install_refuses_before_pip_without_a_wheelhouse_or_with_too_many(self):
        old = wheelhouse.WHEELHOUSE
        wheelhouse.WHEELHOUSE = "/nonexistent/execbox-wheels"
        try:
            with self.assertRaises(PackageInstallError) as caught:
                wheelhouse.install(["tqdm"])
            self.assertIn("this server has no wheelhouse", str(caught.exception))
            with self.assertRaises(PackageInstallError):
                wheelhouse.install(["x"] * (wheelhouse.MAX_PACKAGES + 1))
            with self.assertRaises(PackageInstallError):
                wheelhouse.install([])
        finally:
            wheelhouse.WHEELHOUSE = old


class WheelhouseDirTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="execbox-wheels-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.old = wheelhouse.WHEELHOUSE
        wheelhouse.WHEELHOUSE = self.dir
        self.addCleanup(setattr, wheelhouse, "WHEELHOUSE", self.old)

    def test_pins_are_read_per_normalized_name_across_continued_lines(self):
        self.assertIsNone(wheelhouse._pins())
        a, b, c = "a" * 64, "b" * 64, "C" * 64
        with open(os.path.join(self.dir, "requirements.txt"), "w") as f:
            f.write(f"# comment --hash=sha256:{a}\nFoo_Bar==1.0 \\\n    --hash=sha256:{a} \\\n"
                    f"    --hash=sha256:{b}\nbaz.qux==2 --hash=sha256:{c}  # pinned\nunpinned==1\n")
        self.assertEqual(wheelhouse._pins(), {"foo-bar": {a, b}, "baz-qux": {c.lower()}})

    def test_a_requirements_file_without_hashes_pins_nothing(self):
        with open(os.path.join(self.dir, "requirements.txt"), "w") as f:
            f.write("tqdm==4.64.1\n")
        self.assertIsNone(wheelhouse._pins())

    def test_the_missing_module_note_points_at_a_wheel_of_it(self):
        open(os.path.join(self.dir, "polars_execbox_absent-1.0-py3-none-any.whl"), "w").close()
        note = missing.missing_module_note("polars_execbox_absent")
        self.assertIn("this server's wheelhouse has a wheel of it: `pip install polars_execbox_absent`", note)
        note = missing.missing_module_note("other_execbox_absent")
        self.assertIn("pip installs only from this server's wheelhouse, which has no wheel named so", note)


    def test_a_set_refuses_wheels_of_more_files_than_it_may_hold(self):
        import zipfile
        from unittest import mock
        path = os.path.join(self.dir, "many_files-1.0-py3-none-any.whl")
        with zipfile.ZipFile(path, "w") as wheel:
            for i in range(20):
                wheel.writestr(f"many_files/m{i}.py", "")
        chosen = [("many-files", "1.0", path)]
        env = {"PYTHONUSERBASE": self.dir, "EXECBOX_INSTALL_MAX_FILES": "10"}
        with mock.patch.dict(os.environ, env):
            with self.assertRaises(PackageInstallError) as caught:
                wheelhouse._check_wheels(chosen)
            self.assertIn("the wheels hold 20 files, more than the 10 a package set may hold", str(caught.exception))
        with mock.patch.dict(os.environ, dict(env, EXECBOX_INSTALL_MAX_FILES="20")):
            wheelhouse._check_wheels(chosen)
        with mock.patch.dict(os.environ, {"PYTHONUSERBASE": self.dir}):
            wheelhouse._check_wheels(chosen)  # a work dir: its own limits bound it


class PipArgsTest(unittest.TestCase):
    def test_names_and_a_requirements_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("# wanted\ntqdm==4.64.1\n\nrich  # a comment\n")
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(wheelhouse._install_args(["-q", "--upgrade", "a", "-r", f.name, "b"]),
                         ["a", "tqdm==4.64.1", "rich", "b"])

    def test_options_that_would_leave_the_wheelhouse_are_refused(self):
        for option in ("--index-url", "-i", "--extra-index-url", "--find-links", "--target", "--pre", "-e"):
            with self.assertRaises(PackageInstallError) as caught:
                wheelhouse._install_args([option, "x"])
            self.assertIn("is not supported here", str(caught.exception))

    def test_help_says_where_installs_come_from(self):
        self.assertEqual(wheelhouse.main(["--help"]), 0)

    def test_an_index_is_named_by_an_option_or_the_environment(self):
        saved = {k: os.environ.pop(k, None) for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
        try:
            for args in (["-i", "http://x/simple", "a"], ["--index-url", "u", "a"], ["--index-url=u", "a"],
                         ["--extra-index-url", "u", "a"], ["a", "--extra-index-url=u"]):
                self.assertTrue(wheelhouse._names_an_index(args), args)
            self.assertFalse(wheelhouse._names_an_index(["a", "-r", "req.txt", "--upgrade"]))
            os.environ["PIP_INDEX_URL"] = "http://x/simple"
            self.assertTrue(wheelhouse._names_an_index(["a"]))
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v


class ActivateTest(unittest.TestCase):
    def test_the_user_site_goes_before_dist_packages_once_it_exists(self):
        base = tempfile.mkdtemp(prefix="execbox-userbase-")
        self.addCleanup(shutil.rmtree, base, True)
        old_env, old_path = os.environ.get("PYTHONUSERBASE"), list(sys.path)
        os.environ["PYTHONUSERBASE"] = base

        def restore():
            sys.path[:] = old_path
            if old_env is None:
                os.environ.pop("PYTHONUSERBASE", None)
            else:
                os.environ["PYTHONUSERBASE"] = old_env
        self.addCleanup(restore)
        sys.path[:] = ["/opt/x", "/usr/lib/python3/dist-packages", "/usr/lib/python3.11/dist-packages"]
        wheelhouse.activate()  # not there yet: nothing changes
        self.assertEqual(len(sys.path), 3)
        site = wheelhouse.site_dir()
        os.makedirs(site)
        wheelhouse.activate()
        self.assertEqual(sys.path, ["/opt/x", site, "/usr/lib/python3/dist-packages",
                                    "/usr/lib/python3.11/dist-packages"])
        wheelhouse.activate()  # once
        self.assertEqual(sys.path.count(site), 1)


class PackageSetTest(unittest.TestCase):
    """wheelhouse.use_set: a set the host built (its manifest, its site-packages) is imported
    from; anything else is no set at all, and the execution installs as usual."""

    def setUp(self):
        self.sets = tempfile.mkdtemp(prefix="execbox-sets-") + "/"
        self.addCleanup(shutil.rmtree, self.sets, True)
        old_sets, old_path = wheelhouse.SETS, list(sys.path)
        wheelhouse.SETS = self.sets

        def restore():
            wheelhouse.SETS = old_sets
            sys.path[:] = old_path
            for name in ("execbox_set_mod", "execbox_set_bad"):
                sys.modules.pop(name, None)
        self.addCleanup(restore)

    def make_set(self, name, module, source, manifest=None):
        path = self.sets + name
        site = wheelhouse.site_dir(path)
        os.makedirs(site)
        with open(os.path.join(site, module + ".py"), "w") as f:
            f.write(source)
        with open(os.path.join(path, wheelhouse.MANIFEST), "w") as f:
            f.write(manifest if manifest is not None else
                    '{"installed": [{"name": "m", "version": "1.0", "modules": ["%s"]}]}' % module)
        return path

    def test_a_set_is_imported_from_and_its_manifest_returned(self):
        path = self.make_set("a" * 64, "execbox_set_mod", "V = 3\n")
        installed = wheelhouse.use_set(path)
        self.assertEqual(installed, [{"name": "m", "version": "1.0", "modules": ["execbox_set_mod"]}])
        self.assertEqual(sys.modules["execbox_set_mod"].V, 3)
        self.assertIn(wheelhouse.site_dir(path), sys.path)

    def test_no_set_outside_the_sets_or_without_a_manifest(self):
        good = self.make_set("b" * 64, "execbox_set_mod", "V = 3\n")
        for path in ("/etc", self.sets + "../x", self.sets + ".build-1", self.sets + "c" * 64, 3):
            self.assertIsNone(wheelhouse.use_set(path), path)
        os.unlink(os.path.join(good, wheelhouse.MANIFEST))
        self.assertIsNone(wheelhouse.use_set(good))
        self.make_set("d" * 64, "execbox_set_bad", "", manifest='{"installed": [{"modules": [1]}]}')
        self.assertIsNone(wheelhouse.use_set(self.sets + "d" * 64))

    def test_a_set_whose_module_fails_to_import_is_an_install_error(self):
        path = self.make_set("e" * 64, "execbox_set_bad", "raise RuntimeError('no')\n")
        with self.assertRaises(PackageInstallError) as caught:
            wheelhouse.use_set(path)
        self.assertIn("m 1.0 does not import: RuntimeError: no", str(caught.exception))


if __name__ == "__main__":
    unittest.main()
