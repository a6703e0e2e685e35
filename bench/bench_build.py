"""Builds an exported evolved kernel (.cu from `evoctl export`) into a shared library with nvcc.

Usable as a module (compare_sdpa.py --build-from, dispatch entries naming a .cu) and as a command:
    python3 bench/bench_build.py best.cu out.so [--arch sm_90a]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

DEFAULT_ARCH = os.environ.get("EVO_BENCH_ARCH", "sm_90a")


class BuildError(RuntimeError):
    """nvcc is missing or rejected the source."""


def nvcc_path() -> str:
    """nvcc from PATH, else from CUDA_HOME (default /usr/local/cuda)."""
    found = shutil.which("nvcc")
    if found:
        return found
    candidate = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    if os.path.exists(candidate):
        return candidate
    raise BuildError("nvcc not found on PATH or under CUDA_HOME; install the CUDA toolkit or set CUDA_HOME")


def nvcc_command(nvcc: str, source: str, output: str, arch: str = DEFAULT_ARCH) -> list[str]:
    """The exact build the design promises works for an exported kernel: -shared, PIC, release flags.

    The CUDA runtime is linked statically (nvcc's default) so the library loads next to PyTorch's own
    runtime without a soname clash; both drive the same primary context, so streams are shared.
    """
    return [nvcc, "-O3", "-shared", "-Xcompiler", "-fPIC", f"-arch={arch}", "-o", output, source]


def build_shared(source: str, output: str, arch: str = DEFAULT_ARCH) -> str:
    """Runs nvcc; returns output. Raises BuildError with nvcc's own message on failure."""
    if not os.path.isfile(source):
        raise BuildError(f"no such kernel source: {source}")
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    cmd = nvcc_command(nvcc_path(), source, output, arch)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        first = detail[0] if detail else f"exit {proc.returncode}"
        raise BuildError(f"nvcc failed on {source}: {first} (command: {' '.join(cmd)})")
    return output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build an exported evolved kernel into a shared library.")
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("--arch", default=DEFAULT_ARCH)
    args = parser.parse_args(argv)
    try:
        build_shared(args.source, args.output, args.arch)
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print(f"built {args.output} from {args.source} for {args.arch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
