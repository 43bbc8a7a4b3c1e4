#!/bin/sh
# Install the system headers the optional C extensions build against, before
# `make setup` compiles them; idempotent, only as root, never fatal.
#
# - libdeflate-dev (Debian's libdeflate, 1.14 on bookworm) for
#   pyproflab/decode/_inflate.c: one-member gzip profiles inflated whole, a third
#   faster than zlib-ng's stream. Without it the build skips that extension and
#   every file is streamed by zlib-ng (same bytes, same errors).
set -eu

if [ -f /usr/include/libdeflate.h ]; then
    echo "install-build-deps: libdeflate-dev already installed"
elif [ "$(id -u)" != 0 ]; then
    echo "install-build-deps: libdeflate.h missing and not root; skipping (zlib-ng inflates instead)" >&2
elif ! command -v apt-get >/dev/null 2>&1; then
    echo "install-build-deps: no apt-get; cannot install libdeflate-dev (zlib-ng inflates instead)" >&2
else
    echo "install-build-deps: installing Debian package libdeflate-dev"
    if DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libdeflate-dev >/dev/null 2>&1 ||
        { DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
          DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libdeflate-dev >/dev/null; }; then
        echo "install-build-deps: installed libdeflate-dev"
    else
        echo "install-build-deps: installing libdeflate-dev failed (zlib-ng inflates instead)" >&2
    fi
fi
