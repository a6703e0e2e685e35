#!/usr/bin/env bash
# Stages the A/B program of two builds of fa_s512_v3 into OUT (a git-ignored folder to carry to a
# GPU host): the kernel templates of commit OLD (old_kt/) and of this checkout (new_kt/), and the
# generated sources. On the GPU host: OUT/run.sh [rounds] builds and runs it.
#   lab/build_ab/stage.sh OLD_COMMIT OUT
set -euo pipefail
old=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
rm -rf "$out" && mkdir -p "$out"
cp "$here"/{gen.py,schedules.py,main.cu,tu_body.cuh,run.sh} "$out"/
git -C "$root" archive "$old" kernel_templates | tar x -C "$out" && mv "$out/kernel_templates" "$out/old_kt"
cp -r "$root/kernel_templates" "$out/new_kt"
python3 "$out/gen.py"
