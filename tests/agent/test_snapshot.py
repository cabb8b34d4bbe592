"""The agent's session snapshots (execbox_agent/snapshot.py), without the jail: a snapshot made
in one work dir and __main__ comes back in another; what cannot be pickled is listed; a snapshot
file that was crafted to write outside the work dir, or that is damaged, writes nothing there."""
import io
import json
import os
import pickle
import sys
import tarfile
import tempfile
import types
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "src", "runtime"))
sys.path.append("/usr/lib/python3/dist-packages")  # Debian's cloudpickle, as in the sandbox

try:
    import cloudpickle  # noqa: F401
    from execbox_agent import snapshot
except ImportError as exc:  # python3-cloudpickle missing
    snapshot = None
    MISSING = str(exc)


@unittest.skipIf(snapshot is None, "python3-cloudpickle is not installed")
class SnapshotTest(unittest.TestCase):
    def work_dir(self):
        path = tempfile.mkdtemp(prefix="execbox-snap-")
        self.addCleanup(lambda: __import__("shutil").rmtree(path, True))
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        self.addCleanup(os.close, fd)
        return path, fd

    def hand_over(self, from_dir, to_dir):
        os.rename(os.path.join(from_dir, snapshot.SNAPSHOT_NAME), os.path.join(to_dir, snapshot.RESTORE_NAME))

    def test_state_and_files_come_back_with_what_was_left_out(self):
        src, src_fd = self.work_dir()
        main = types.ModuleType("__main__")
        exec("scale = 2\ndef f(x):\n    return x * scale\nshared = [1]\nalias = shared\n"
             "gen = (i for i in [1])\n", main.__dict__)
        old = os.getcwd()
        os.chdir(src)
        try:
            os.makedirs("d")
            with open("d/a.txt", "w") as f:
                f.write("a")
            os.symlink("d/a.txt", "link")
        finally:
            os.chdir(old)
        summary = snapshot.take(main, src_fd, {"<cell>": "scale = 2"})
        self.assertEqual([e["name"] for e in summary["not_copied"]], ["gen"])
        self.assertEqual(summary["files"], 1)
        dst, dst_fd = self.work_dir()
        self.hand_over(src, dst)
        fresh = types.ModuleType("__main__")
        restored = snapshot.restore(dst_fd, fresh)
        self.assertFalse(os.path.exists(os.path.join(dst, snapshot.RESTORE_NAME)))
        self.assertEqual(restored["sources"], {"<cell>": "scale = 2"})
        self.assertNotIn("gen", fresh.__dict__)
        self.assertEqual(fresh.f(3), 6)
        fresh.scale = 10  # the restored function sees the new module's globals
        self.assertEqual(fresh.f(3), 30)
        self.assertIs(fresh.shared, fresh.alias)
        with open(os.path.join(dst, "d", "a.txt")) as f:
            self.assertEqual(f.read(), "a")
        self.assertEqual(os.readlink(os.path.join(dst, "link")), "d/a.txt")

    def crafted(self, work_dir, members):
        """A snapshot file whose tar holds `members` ((TarInfo, bytes or None), ...)."""
        buf = io.BytesIO()
        buf.write(snapshot.MAGIC)
        pickle.dump(("x", 1), buf)
        pickle.dump(None, buf)
        tar_at = buf.tell()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for info, data in members:
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        manifest_at = buf.tell()
        buf.write(json.dumps({"version": 1, "names": ["x"], "not_copied": [], "sources": {}}).encode())
        buf.write(snapshot._TRAILER.pack(tar_at, manifest_at, snapshot.MAGIC))
        with open(os.path.join(work_dir, snapshot.RESTORE_NAME), "wb") as f:
            f.write(buf.getvalue())

    def test_a_crafted_tar_writes_nothing_outside_the_work_dir(self):
        outside = tempfile.mkdtemp(prefix="execbox-outside-")
        self.addCleanup(lambda: __import__("shutil").rmtree(outside, True))
        dst, dst_fd = self.work_dir()

        def member(name, data=b"x", kind=tarfile.REGTYPE, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            info.size = len(data) if kind == tarfile.REGTYPE else 0
            return info, data if kind == tarfile.REGTYPE else None

        self.crafted(dst, [member("../escaped"), member(os.path.join(outside, "absolute")),
                           member("out", kind=tarfile.SYMTYPE, link=outside), member("out/through-link"),
                           member("dev", kind=tarfile.CHRTYPE), member("ok.txt", b"fine")])
        fresh = types.ModuleType("__main__")
        restored = snapshot.restore(dst_fd, fresh)
        self.assertEqual(os.listdir(outside), [])
        self.assertFalse(os.path.exists(os.path.join(os.path.dirname(dst), "escaped")))
        with open(os.path.join(dst, "ok.txt")) as f:
            self.assertEqual(f.read(), "fine")
        self.assertEqual(fresh.x, 1)
        refused = {e["name"] for e in restored["not_restored"]}
        self.assertTrue({"../escaped", "out/through-link", "dev"} <= refused, restored)

    def test_a_damaged_file_is_refused(self):
        dst, dst_fd = self.work_dir()
        for content in (b"", b"junk" * 10, snapshot.MAGIC + b"\0" * 40):
            with open(os.path.join(dst, snapshot.RESTORE_NAME), "wb") as f:
                f.write(content)
            with self.assertRaises(snapshot.SnapshotError):
                snapshot.restore(dst_fd, types.ModuleType("__main__"))

    def test_a_roots_layer_comes_back_through_the_new_root_and_the_home_stays_the_home(self):
        """A session's root layer (jail/session_root.h) beside its home: a new file, a file of
        the system removed (a whiteout), a directory that hides the system's (opaque); the
        home's file of the same name stays in the home."""
        home, home_fd = self.work_dir()
        layer, layer_fd = self.work_dir()
        os.makedirs(os.path.join(home, "opt/app"))
        with open(os.path.join(home, "opt/app/x.txt"), "w") as f:
            f.write("home's")
        os.makedirs(os.path.join(layer, "opt/app"))
        with open(os.path.join(layer, "opt/app/x.txt"), "w") as f:
            f.write("root's")
        os.makedirs(os.path.join(layer, "opt/old"))
        with open(os.path.join(layer, "opt/old/kept.txt"), "w") as f:
            f.write("kept")
        os.setxattr(os.path.join(layer, "opt/old"), "user.overlay.opaque", b"y")
        whiteout = os.geteuid() == 0
        if whiteout:
            os.makedirs(os.path.join(layer, "etc"))
            os.mknod(os.path.join(layer, "etc/group"), 0o600 | __import__("stat").S_IFCHR, 0)
        summary = snapshot.take(types.ModuleType("__main__"), home_fd, {}, layer=layer_fd)
        self.assertEqual(summary["not_copied"], [])
        self.assertEqual(summary["files"], 3)

        new_home, new_home_fd = self.work_dir()
        root, root_fd = self.work_dir()  # the new session's root, with the system's files
        os.makedirs(os.path.join(root, "etc"))
        os.makedirs(os.path.join(root, "opt/old"))
        for name in ("etc/group", "opt/old/stale.txt", "opt/old/kept.txt"):
            with open(os.path.join(root, name), "w") as f:
                f.write("system's")
        self.hand_over(home, new_home)
        restored = snapshot.restore(new_home_fd, types.ModuleType("__main__"), root=root_fd)
        self.assertEqual(restored["not_restored"], [])
        with open(os.path.join(new_home, "opt/app/x.txt")) as f:
            self.assertEqual(f.read(), "home's")
        with open(os.path.join(root, "opt/app/x.txt")) as f:
            self.assertEqual(f.read(), "root's")
        self.assertEqual(sorted(os.listdir(os.path.join(root, "opt/old"))), ["kept.txt"])
        with open(os.path.join(root, "opt/old/kept.txt")) as f:
            self.assertEqual(f.read(), "kept")
        self.assertEqual(os.path.exists(os.path.join(root, "etc/group")), not whiteout)

    def test_a_roots_layer_without_a_root_to_restore_into_is_listed_not_written(self):
        home, home_fd = self.work_dir()
        layer, layer_fd = self.work_dir()
        with open(os.path.join(layer, "data.txt"), "w") as f:
            f.write("x")
        snapshot.take(types.ModuleType("__main__"), home_fd, {}, layer=layer_fd)
        new_home, new_home_fd = self.work_dir()
        self.hand_over(home, new_home)
        restored = snapshot.restore(new_home_fd, types.ModuleType("__main__"))
        self.assertEqual([e["name"] for e in restored["not_restored"]], ["/data.txt"])
        self.assertFalse(os.path.exists(os.path.join(new_home, "data.txt")))


if __name__ == "__main__":
    unittest.main()
