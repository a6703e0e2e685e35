"""Builds an evo_kernels package (written by `evoctl export --python`) on the machine it installs on.

Install with the PyTorch already there, and no network:

    pip install --no-build-isolation --no-index DIR

Two kinds of build: the torch op (csrc/evo_op.cpp, against this PyTorch), and each exported
kernel (evo_kernels/kernels/<arch>/kernel.cu) with nvcc for its own architecture into a library
of its own, which the op loads for the devices it serves. EVO_KERNELS_ARCHS=sm_90a,... builds
only those architectures.
"""
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import setup
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "evo_kernels"))
import routing  # noqa: E402  the package's pure rules, without importing the package (it needs _C)


TOOLKIT = CUDA_HOME or "/usr/local/cuda"


def nvcc_path():
    nvcc = os.path.join(TOOLKIT, "bin", "nvcc")
    if not os.path.exists(nvcc):
        sys.exit("evo_kernels: nvcc not found at %s (set CUDA_HOME to the CUDA toolkit)" % nvcc)
    return nvcc


class BuildOpAndKernels(BuildExtension):
    """The op as torch builds extensions, then every selected architecture's kernel library."""

    def run(self):
        super().run()
        manifest = routing.load_manifest(os.path.join(HERE, "evo_kernels"))
        libraries = {lib["arch"]: lib for lib in manifest["libraries"]}
        try:
            archs = routing.archs_to_build(list(libraries), os.environ.get("EVO_KERNELS_ARCHS", ""))
        except ValueError as e:
            sys.exit("evo_kernels: %s" % e)
        package_out = os.path.join(HERE if self.inplace else self.build_lib, "evo_kernels")
        nvcc = nvcc_path()
        with ThreadPoolExecutor(max_workers=max(1, len(archs))) as pool:
            for arch, error in pool.map(lambda a: self._build_kernel(nvcc, libraries[a], package_out), archs):
                if error:
                    sys.exit("evo_kernels: nvcc failed for %s:\n%s" % (arch, error))

    @staticmethod
    def _build_kernel(nvcc, library, package_out):
        source = os.path.join(HERE, "evo_kernels", library["source"])
        out_dir = os.path.join(package_out, os.path.dirname(library["source"]))
        os.makedirs(out_dir, exist_ok=True)
        command = [nvcc, "-O3", "-shared", "-Xcompiler", "-fPIC", *routing.nvcc_arch_flags(library["arch"]),
                   "-o", os.path.join(out_dir, routing.LIBRARY_NAME), source]
        print("evo_kernels: " + " ".join(command), flush=True)
        done = subprocess.run(command, capture_output=True, text=True)
        return library["arch"], (done.stderr or done.stdout) if done.returncode != 0 else ""


setup(
    name="evo_kernels",
    version="0.1.0",
    description="evo's tuned attention kernels as torch.ops.evo.attention",
    packages=["evo_kernels"],
    package_data={"evo_kernels": ["manifest.json", "kernels/*/*"]},
    # The op is plain C++: it takes the CUDA headers for its types and links PyTorch's c10_cuda for
    # streams and torch_cuda for its output's allocation, but no CUDA runtime of the toolkit's,
    # whose version may differ from PyTorch's.
    ext_modules=[CppExtension("evo_kernels._C", ["csrc/evo_op.cpp"], include_dirs=[os.path.join(TOOLKIT, "include")],
                              libraries=["c10_cuda", "torch_cuda", "dl"], extra_compile_args={"cxx": ["-O2"]})],
    cmdclass={"build_ext": BuildOpAndKernels},
    zip_safe=False,
)
