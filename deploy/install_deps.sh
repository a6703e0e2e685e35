#!/usr/bin/env bash
# Installs every build and test dependency of evo from Debian/Ubuntu packages.
# The CUDA toolkit (NVRTC, the static runtime) is expected at ${CUDA_HOME:-/usr/local/cuda}.
set -euo pipefail
packages=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libsqlite3-dev sqlite3 libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev python3 procps
)
# The libFuzzer targets (cmake -DEVO_BUILD_FUZZERS=ON) need clang and its fuzzer runtime.
if [ "${EVO_BUILD_FUZZERS:-0}" = 1 ]; then packages+=(clang libclang-rt-14-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "evo: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "evo: all build dependencies present"
fi
cuda="${CUDA_HOME:-/usr/local/cuda}"
if [ ! -f "$cuda/include/nvrtc.h" ]; then
  echo "evo: the CUDA toolkit was not found at $cuda (set CUDA_HOME); NVRTC is required" >&2
  exit 1
fi
