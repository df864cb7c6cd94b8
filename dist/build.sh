#!/usr/bin/env bash
# dist/build.sh OUTDIR: the release binaries of mcplhost, for linux and
# darwin on amd64 and arm64, each in OUTDIR/mcplhost_VERSION_OS_ARCH.tar.gz
# with LICENSE and README.md, and OUTDIR/SHA256SUMS.
#
# Static (CGO off: the SQLite driver is pure Go) and -trimpath (no builder
# paths in the binary). The binary's version is what Go stamps from the
# checkout (-buildvcs=true, whatever GOFLAGS says): the tag at HEAD
# (v1.2.0), else a pseudo-version, +dirty for a modified tree, and the
# revision; internal/buildinfo reads it, `go version -m mcplhost` shows it.
# Where Go can't read the checkout's VCS it is "(devel)", so VERSION in
# the file names is git describe's, which names the commit either way. A
# release: tag the commit, run this on a clean checkout of it.
set -euo pipefail
out="${1:?usage: dist/build.sh OUTDIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
cd "$(dirname "$0")/.."
version="$(git describe --tags --always --dirty 2>/dev/null || echo devel)"
for target in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os="${target%/*}"
  arch="${target#*/}"
  name="mcplhost_${version}_${os}_${arch}"
  mkdir -p "$out/$name"
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" go build -trimpath -buildvcs=true -o "$out/$name/mcplhost" ./cmd/mcplhost
  cp LICENSE README.md "$out/$name/"
  tar -C "$out" -czf "$out/$name.tar.gz" "$name"
  echo "$out/$name.tar.gz"
done
(cd "$out" && sha256sum ./*.tar.gz > SHA256SUMS)
