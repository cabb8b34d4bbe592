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


if __name__ == "__main__":
    unittest.main()
