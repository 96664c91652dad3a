#!/bin/sh
# Copies the shared libraries that the given binaries need into DEST, except
# the C runtime and the CUDA libraries, which the runtime base image provides.
# Package names differ between distributions; the files ldd resolves do not.
#   collect-runtime-libs.sh DEST BINARY...
set -eu
dest=$1
shift
mkdir -p "$dest"
for binary in "$@"; do
  ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libdl.so* | libpthread.so* | librt.so* | ld-linux*) ;;
    libcuda.so* | libcudart.so* | libcublas*.so* | libnvidia*) ;;
    *) cp -L "$lib" "$dest/" ;;
  esac
done
