#!/usr/bin/env bash
# Regenerates 1/saxpy.ptx from 1/saxpy.cu. Needs nvcc (CUDA 13 here); needs no GPU.
#
# nvcc 13 writes PTX ISA 9.0, which only a driver for CUDA 13.0 or newer can JIT. This kernel
# uses nothing newer than ISA 7.0, so the script lowers the .version line to PTX_ISA (default
# 7.0: any driver for CUDA 11.0 or newer) and then checks the result with ptxas for sm_75 and
# sm_90, so a lowered file that the old ISA cannot express fails here, not on a GPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
isa=${PTX_ISA:-7.0}
arch=${PTX_ARCH:-compute_75}
nvcc -ptx -arch="$arch" "$here/1/saxpy.cu" -o "$here/1/saxpy.ptx.tmp"
sed -i "s/^\.version [0-9]*\.[0-9]*$/.version $isa/" "$here/1/saxpy.ptx.tmp"
for sm in sm_75 sm_90; do
  ptxas -arch="$sm" "$here/1/saxpy.ptx.tmp" -o /dev/null
done
mv "$here/1/saxpy.ptx.tmp" "$here/1/saxpy.ptx"
echo "wrote $here/1/saxpy.ptx (PTX ISA $isa, $arch; ptxas-checked for sm_75 and sm_90)"
