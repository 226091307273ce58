#!/usr/bin/env bash
# A source build that lacks a library stops at configure with one message
# naming the Debian package to install (CMakeLists.txt, memtl_require).
#   test_configure.sh SOURCE WORKDIR
set -euo pipefail
source="$1" work="$2"
passed=0
for case in "absl libabsl-dev" "CLI11 libcli11-dev" "Eigen3 libeigen3-dev" "ZLIB zlib1g-dev"; do
  read -r package debian <<<"$case"
  rm -rf "$work"
  if cmake -S "$source" -B "$work" -DMEMTL_BUILD_TESTS=OFF -DMEMTL_TORCH_NATIVE=OFF \
    -DCMAKE_DISABLE_FIND_PACKAGE_"$package"=ON >"$work.log" 2>&1; then
    echo "FAIL: configure without $package succeeded"
    exit 1
  fi
  if ! tr '\n' ' ' <"$work.log" | tr -s ' ' | grep -q "install the Debian package $debian"; then
    echo "FAIL: configure without $package does not name $debian:"
    cat "$work.log"
    exit 1
  fi
  passed=$((passed + 1))
done
rm -rf "$work" "$work.log"
echo "$passed passed, 0 failed: a missing library names its Debian package"
