#!/usr/bin/env bash
# Installs the Debian packages memtl needs, only those that are missing.
# usage: scripts/deps.sh build|test
set -euo pipefail
# libisal-dev (ISA-L, found with pkg-config) inflates gzip traces and writes
# the .gz outputs.
# libjs-dygraphs: the HTML report's interactive chart (embedded when CMake
# configures; without it the report has the image only).
# libeigen3-dev: memtl fit's least squares (header-only).
build_pkgs=(cmake g++ make pkg-config libisal-dev libabsl-dev libpng-dev zlib1g-dev libcli11-dev libeigen3-dev python3-venv libjs-dygraphs)
# libtorch-dev and pybind11-dev build the recorder's native walk
# (collect/CMakeLists.txt), which the Python tests compare with the Python walk.
# libpng-dev (found with pkg-config): the unit tests decode the plot's PNG with
# libpng, not with our own code.
# isal: its igzip command, the benchmarks' reference for how fast gzip inflates.
# time: /usr/bin/time, the peak memory of a command for the CI memory guard.
# chromium and chromium-driver: the HTML report's browser test (selenium comes
# from scripts/venv.sh).
test_pkgs=(clang-format clang-tidy doctest-dev nlohmann-json3-dev libpng-dev python3-pytest python3-torch python3-torchvision libtorch-dev pybind11-dev isal time chromium chromium-driver)
case "${1:-build}" in
  build) want=("${build_pkgs[@]}") ;;
  test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
  *) echo "usage: $0 build|test" >&2; exit 2 ;;
esac
missing=()
for p in "${want[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
