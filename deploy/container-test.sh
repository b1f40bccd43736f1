#!/usr/bin/env bash
# The container image's test (tests/container, marked `container`): installs podman, runc, debootstrap and
# redis-server where it can (root + apt-get), builds a base image once (cached in podman's store), then
# runs the test. Prints "container test skipped: <reason>" and exits 0 when it cannot run here.
#
# The base: no registry image can be pulled on our machines, so a Debian bookworm root file system
# (debootstrap, Python 3.11) with a venv on PATH stands in for python:3.11-slim. Set RELAY_IMAGE_BASE to
# an image you have (e.g. python:3.11-slim) to use that instead.
set -euo pipefail
cd "$(dirname "$0")/.."

skip() {
    echo "container test skipped: $*"
    exit 0
}

BASE=${RELAY_IMAGE_BASE:-local/relay-base:bookworm-py3.11}
ROOTFS_IMAGE=local/debian-python:bookworm
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || skip "no $PYTHON (run the README's install first)"

missing=()
for tool in podman /usr/sbin/runc redis-server; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
[ -n "${RELAY_IMAGE_BASE:-}" ] || command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "installing podman runc debootstrap redis-server (missing: ${missing[*]})"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap redis-server >/dev/null ||
            skip "apt-get install podman runc debootstrap redis-server failed"
    else
        skip "missing ${missing[*]}, and not root with apt-get to install them"
    fi
fi

# podman's settings for these machines (crun and the default rlimits are refused here), without
# touching /etc: CONTAINERS_CONF is podman's own override. The test uses the same file.
conf_dir=${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/relay-container-test
mkdir -p "$conf_dir"
export CONTAINERS_CONF="$conf_dir/containers.conf"
printf '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n' >"$CONTAINERS_CONF"
podman info >/dev/null 2>&1 || skip "podman cannot run here: $(podman info 2>&1 | tail -1)"

started=$(date +%s)
if ! podman image exists "$BASE"; then
    [ -z "${RELAY_IMAGE_BASE:-}" ] || skip "base image $BASE is not in podman's store"
    if ! podman image exists "$ROOTFS_IMAGE"; then
        echo "building $ROOTFS_IMAGE with debootstrap (once; about 2 minutes)"
        root=$(mktemp -d)
        trap 'rm -rf "$root"' EXIT
        debootstrap --variant=minbase --include=python3,python3-venv,python3-pip,ca-certificates \
            bookworm "$root" http://deb.debian.org/debian >"$conf_dir/debootstrap.log" 2>&1 ||
            skip "debootstrap failed (see $conf_dir/debootstrap.log)"
        tar -C "$root" -c . | podman import - "$ROOTFS_IMAGE" >/dev/null
        rm -rf "$root"
        trap - EXIT
    fi
    echo "building $BASE on $ROOTFS_IMAGE (a venv on PATH, as python:3.11-slim has python and pip on PATH)"
    printf 'FROM %s\nRUN python3 -m venv /opt/venv && ln -sf python3 /opt/venv/bin/python\nENV PATH=/opt/venv/bin:$PATH\n' \
        "$ROOTFS_IMAGE" | podman build --format docker --network host -t "$BASE" -f - . >/dev/null
fi
echo "base image ready in $(($(date +%s) - started)) s"

export RELAY_IMAGE_BASE=$BASE
started=$(date +%s)
"$PYTHON" -m pytest -q -p no:cacheprovider -m container tests/container
echo "container test: $(($(date +%s) - started)) s"
