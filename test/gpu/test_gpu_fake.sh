#!/usr/bin/env bash
#
# test_gpu_fake.sh - test/gpu/run-gpu-tests.sh --fake-cudart: the GPU code
# paths (ucx_cxl.data.device, the staging check of torch_bench.py and its
# negative control) through test/gpu/fake_cudart.c, on any machine: what
# make check runs so that they do not wait for a machine with a GPU.
#
#   test/gpu/test_gpu_fake.sh [BUILDDIR]
set -u
case "${1:-}" in
    -h|--help) awk 'NR < 3 { next } /^#/ { sub(/^# ?/, ""); print; next } { exit }' "$0"; exit 0 ;;
esac
command -v gcc >/dev/null 2>&1 || { echo "SKIP: gcc not found"; exit 77; }
exec "$(dirname "${BASH_SOURCE[0]}")/run-gpu-tests.sh" --fake-cudart "$@"
