#!/bin/sh
# Install what `make fuzz` needs beyond the Python packages, idempotently:
# clang (Debian's package), which builds the decoder's C extension with
# AddressSanitizer, UndefinedBehaviorSanitizer and libFuzzer's edge counters
# (gcc has no -fsanitize=fuzzer-no-link). atheris itself comes from the
# project's `fuzz` extra (pyproject.toml).
set -eu

if command -v "${CLANG:-clang}" >/dev/null 2>&1; then
    echo "install-fuzz-deps: clang already installed ($("${CLANG:-clang}" --version | head -n 1))"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install-fuzz-deps: clang is missing; install it (apt-get install clang) and rerun make fuzz" >&2
    exit 1
fi
echo "install-fuzz-deps: installing Debian package clang"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends clang >/dev/null
echo "install-fuzz-deps: installed $(clang --version | head -n 1)"
