#!/usr/bin/env python3
"""Whether two versions of a kernel source compile an instantiation to the same machine code.

    python3 lab/persistent/same_sass.py OLD.cu NEW.cu 'evo::fa_s512_v3_kernel<0, 0, 128, ...>' ...

OLD.cu and NEW.cu are whole kernel texts as NVRTC compiles them (a build's
kernel_templates/embedded_kEmbedded_attention_fa_s512_v3_source.cpp holds one between
`R"evo_embed(` and `)evo_embed"`; `--from-embedded FILE` reads it from there). Each name is compiled
from both with NVRTC for sm_90a, the worker's options, and the cubins' .text sections are compared:
IDENTICAL, or DIFFERENT with their sizes. No GPU needed: a change meant to leave some kernels as
they were can be checked here before a device call measures the rest.
"""
import ctypes
import struct
import sys

OPTIONS = [b"--gpu-architecture=sm_90a", b"-std=c++17", b"-I/usr/local/cuda/include"]


def read_source(arg):
    if arg.startswith("--from-embedded="):
        text = open(arg.split("=", 1)[1]).read()
        return text[text.index('R"evo_embed(') + len('R"evo_embed('):text.rindex(')evo_embed"')]
    return open(arg).read()


def compile_cubin(nvrtc, source, name):
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    try:
        nvrtc.nvrtcAddNameExpression(prog, name.encode())
        options = (ctypes.c_char_p * len(OPTIONS))(*OPTIONS)
        if nvrtc.nvrtcCompileProgram(prog, len(OPTIONS), options):
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(log.value.decode(errors="replace")[:2000])
        size = ctypes.c_size_t()
        nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
        cubin = ctypes.create_string_buffer(size.value)
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        return cubin.raw
    finally:
        nvrtc.nvrtcDestroyProgram(ctypes.byref(prog))


def text_sections(elf):
    """The ELF64 file's .text* sections, by name."""
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = {}
    for name, _, _, _, offset, size in headers:
        label = elf[names_at + name:elf.index(b"\0", names_at + name)].decode()
        if label.startswith(".text"):
            out[label] = elf[offset:offset + size]
    return out


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    old, new = read_source(argv[1]), read_source(argv[2])
    nvrtc = ctypes.CDLL("libnvrtc.so")
    differ = 0
    for name in argv[3:]:
        a = text_sections(compile_cubin(nvrtc, old, name))
        b = text_sections(compile_cubin(nvrtc, new, name))
        same = sorted(a.values()) == sorted(b.values())
        differ += not same
        sizes = f"{sum(map(len, a.values()))} -> {sum(map(len, b.values()))} bytes"
        print(f"{'IDENTICAL' if same else 'DIFFERENT'} {sizes} {name}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
