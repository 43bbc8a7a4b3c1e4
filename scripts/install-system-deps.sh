#!/bin/sh
# Install the system packages the tests need, idempotently, and say what was done.
#
# - prometheus (Debian's package, 2.42 on bookworm) for tests/sources/test_prometheus_server.py.
# - chromium (Debian's package) for the headless browser tests of the HTML report
#   (tests/reports/test_report_browser.py, tests/reports/test_untrusted_names.py).
# - a Java runtime (Debian's default-jre-headless: OpenJDK 17 on bookworm, 21 on
#   trixie; Spark 4 runs on either) for the Spark engine's tests (tests/engines/).
#
# The package's maintainer scripts would start a prometheus daemon (systemd or
# /etc/init.d). The tests start their own on 127.0.0.1 and nothing may keep
# running, so a temporary policy-rc.d forbids service starts during the install,
# and any prometheus process that appeared during the install is stopped by PID.
set -eu

# chromium: only if missing, only as root, never fatal (its tests skip without it).
if [ -x /usr/bin/chromium ]; then
    echo "install-system-deps: chromium already installed ($(/usr/bin/chromium --version 2>/dev/null | head -n 1))"
elif [ "$(id -u)" != 0 ]; then
    echo "install-system-deps: /usr/bin/chromium missing and not root; skipping (browser tests will skip)" >&2
elif ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: no apt-get; cannot install chromium (browser tests will skip)" >&2
else
    echo "install-system-deps: installing Debian package chromium"
    if DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; then
        echo "install-system-deps: installed $(/usr/bin/chromium --version 2>/dev/null | head -n 1)"
    else
        echo "install-system-deps: installing chromium failed (browser tests will skip)" >&2
    fi
fi

# java: only if missing, only as root, never fatal (the Spark tests skip without it).
if command -v java >/dev/null 2>&1; then
    echo "install-system-deps: java already installed ($(java -version 2>&1 | head -n 1))"
elif [ "$(id -u)" != 0 ]; then
    echo "install-system-deps: java missing and not root; skipping (Spark tests will skip)" >&2
elif ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: no apt-get; cannot install java (Spark tests will skip)" >&2
else
    echo "install-system-deps: installing Debian package default-jre-headless"
    if DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            default-jre-headless >/dev/null; then
        echo "install-system-deps: installed $(java -version 2>&1 | head -n 1)"
    else
        echo "install-system-deps: installing java failed (Spark tests will skip)" >&2
    fi
fi

if [ -x /usr/bin/prometheus ]; then
    echo "install-system-deps: prometheus already installed ($(/usr/bin/prometheus --version 2>&1 | head -n 1))"
    exit 0
fi

if [ "$(id -u)" != 0 ]; then
    echo "install-system-deps: /usr/bin/prometheus missing and not root; skipping (its tests will skip)" >&2
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-system-deps: no apt-get; cannot install prometheus (its tests will skip)" >&2
    exit 0
fi

before=$(pgrep -x prometheus || true)

policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    # Exit code 101: "action forbidden" for invoke-rc.d / deb-systemd-invoke.
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 755 "$policy"
    made_policy=1
fi
cleanup() {
    if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi
}
trap cleanup EXIT INT TERM

echo "install-system-deps: installing Debian package prometheus"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null

# Stop, by PID, any prometheus the install started (none should have).
for pid in $(pgrep -x prometheus || true); do
    case " $(echo $before) " in
        *" $pid "*) continue ;;
    esac
    echo "install-system-deps: stopping prometheus pid $pid started by the package"
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    kill -KILL "$pid" 2>/dev/null || true
done
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus >/dev/null 2>&1 || true
fi

echo "install-system-deps: installed $(/usr/bin/prometheus --version 2>&1 | head -n 1)"
