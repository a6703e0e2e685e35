#!/usr/bin/env bash
# A relocatable bundle for GPU hosts that have the CUDA toolkit but not gRPC, protobuf, spdlog...
#
#   deploy/bundle.sh BUILD_DIR OUT_DIR
#
# BUILD_DIR must be configured with -DEVO_RELOCATABLE=ON (an RPATH of $ORIGIN/../lib, which unlike
# RUNPATH also serves the bundled libraries' own dependencies). OUT_DIR gets bin/ (evod,
# evo-worker, evoctl and the test binaries) and lib/ (every library ldd lists, except glibc's own,
# libstdc++, libgcc_s and NVRTC, which the host's CUDA toolkit provides). The bundle is checked by
# running bin/evo-worker --help with LD_LIBRARY_PATH unset.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: deploy/bundle.sh BUILD_DIR OUT_DIR" >&2
  exit 2
fi
build="$1" out="$2"
[ -d "$build" ] || { echo "bundle: build directory '$build' does not exist" >&2; exit 2; }

daemons=(evod evo-worker evoctl)
find_binary() { find "$build" -type f -name "$1" -perm -u+x -not -path '*/CMakeFiles/*' -print -quit; }

mkdir -p "$out/bin" "$out/lib"
binaries=()
for name in "${daemons[@]}"; do
  path="$(find_binary "$name")"
  [ -n "$path" ] || { echo "bundle: $name not found under $build (build it first)" >&2; exit 1; }
  binaries+=("$path")
done
# The test binaries (gpu_tests, worker_tests, ...) so the GPU host can prove itself.
while IFS= read -r t; do binaries+=("$t"); done < <(find "$build" -type f -name '*_tests' -perm -u+x -not -path '*/CMakeFiles/*')

for b in "${binaries[@]}"; do
  if ! readelf -d "$b" | grep -q 'RPATH.*\$ORIGIN/../lib'; then
    echo "bundle: $b has no RPATH \$ORIGIN/../lib: configure $build with -DEVO_RELOCATABLE=ON" >&2
    exit 1
  fi
  cp -f "$b" "$out/bin/"
done

# glibc's own libraries, the C++ runtime, the loader and NVRTC stay the host's.
keep_host='^(linux-vdso|linux-gate|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libanl\.so|libnsl\.so|libmvec\.so|libstdc\+\+\.so|libgcc_s\.so|libnvrtc|libcuda\.so)'
missing=0
for b in "${binaries[@]}"; do
  while read -r name _ path _; do
    [[ "$name" =~ $keep_host ]] && continue
    if [ "$path" = "not" ] || [ -z "$path" ]; then
      echo "bundle: $(basename "$b") needs $name, which ldd cannot find" >&2
      missing=1
      continue
    fi
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done < <(ldd "$b" | awk '/=>/ {print $1, $2, $3, $4}')
done
[ "$missing" -eq 0 ] || exit 1

# Debug info is for the build machine; the GPU host gets the code (RelWithDebInfo: 208 MB -> 38 MB).
if command -v strip >/dev/null; then
  strip --strip-debug "$out"/bin/* "$out"/lib/* 2>/dev/null || true
fi

# The proof: it starts with nothing but its own lib/.
if ! env -u LD_LIBRARY_PATH "$out/bin/evo-worker" --help >/dev/null; then
  echo "bundle: $out/bin/evo-worker --help failed with LD_LIBRARY_PATH unset" >&2
  exit 1
fi
echo "bundle: $out: $(ls "$out/bin" | wc -l) binaries, $(ls "$out/lib" | wc -l) libraries, $(du -sh "$out" | cut -f1)"
