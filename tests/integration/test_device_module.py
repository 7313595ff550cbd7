"""The CUDA backend is a module the daemon loads only when it needs it (gpu/meson.build): with
`--device auto` on a machine without an NVIDIA device, pgcld serves on the CPU without mapping
cuBLAS or the module; `--device cuda:0` loads the module and fails start-up with the driver's
reason where there is no GPU; an explicit PGCLD_CUDA_MODULE that does not exist is named in the
error. Skips (77) in a build without CUDA (the toolkit is NVIDIA's, not installed by
deploy/install-deps.sh: an environment limit); on a machine with an NVIDIA device the two cases about
a machine without one skip.

Run: /usr/bin/python3 tests/integration/test_device_module.py (PGCLD_BIN selects the binary).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402
import skips  # noqa: E402

MODULE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(H.PGCLD_BIN))), "gpu", "pgcld_cuda.so")
HAVE_GPU = any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/nvidia0"))


class DeviceModuleTest(unittest.TestCase):
    def test_auto_without_gpu_maps_no_cuda(self):
        if HAVE_GPU:
            self.skipTest("this machine has an NVIDIA device: auto uses it")
        d = H.Daemon(models=("toxicity",), args=["--device", "auto"])
        self.addCleanup(d.cleanup)
        d.start()
        self.assertTrue(H.wait_until(lambda: d.get("/readyz").status == 200, 30))
        with open(f"/proc/{d.proc.pid}/maps") as f:
            maps = f.read()
        for lib in ("libcublas", "libcudart", "pgcld_cuda.so"):
            self.assertNotIn(lib, maps, f"{lib} is mapped although no device is present")
        r = d.score({"items": H.json_items(H.random_embeddings(2, 1024, 1))})
        self.assertEqual(r.status, 200, r)
        self.assertIn("no NVIDIA device", d.logs(10 ** 9))

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pgcld-device-module-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def start_fails(self, extra_env, *args):
        env = dict(os.environ, **extra_env)
        models = os.path.dirname(H.model_source("toxicity"))
        p = subprocess.run([H.PGCLD_BIN, "serve", "--listen", "127.0.0.1:0", "--models", models,
                            "--db", "/dev/null/never", *args], capture_output=True, text=True, env=env, timeout=60,
                           cwd=self.tmp)
        return p

    def test_cuda_device_loads_the_module(self):
        if HAVE_GPU:
            self.skipTest("this machine has an NVIDIA device")
        p = self.start_fails({}, "--device", "cuda:0")
        self.assertEqual(p.returncode, 1, p.stderr)  # start-up failure (2 is for usage errors)
        self.assertIn("cuda:0", p.stderr)
        self.assertNotIn("built without CUDA", p.stderr)
        self.assertNotIn("cannot load the CUDA backend module", p.stderr)

    def test_missing_module_is_named(self):
        missing = os.path.join(self.tmp, "no-such-dir", "pgcld_cuda.so")
        p = self.start_fails({"PGCLD_CUDA_MODULE": missing}, "--device", "cuda:0")
        self.assertEqual(p.returncode, 1, p.stderr)  # start-up failure (2 is for usage errors)
        self.assertIn("cannot load the CUDA backend module", p.stderr)
        self.assertIn(missing, p.stderr)


if __name__ == "__main__":
    H.require_binary()
    if not os.path.exists(MODULE):
        skips.skip_program(f"{MODULE} absent (a build without CUDA)")
    H.main()
