#!/bin/bash
# Packaging checks (issue 7), run by .ci/run as root on a fresh Debian 12 machine after the
# main build and tests: builds the .deb with dpkg-buildpackage, installs it, checks every file
# is where it belongs (umdctl, the health-check pieces, NHC file, Prometheus rules, man pages),
# runs lintian (no errors or warnings), verifies and scores the systemd units, checks the Prometheus rules,
# runs the installed daemon (plainly and socket-activated), then removes and purges it.
# Prints "N passed, N failed" last; exits non-zero when anything failed.
# No systemd runs on the CI machine: debhelper's maintainer scripts skip systemctl there, and
# systemd-analyze works offline.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
passed=0
failed=0
failures=()

ok() {
	passed=$((passed + 1))
	echo "ok   - $1"
}
fail() {
	failed=$((failed + 1))
	failures+=("$1")
	echo "FAIL - $1"
}
# check NAME COMMAND...: one check, its output shown only when it fails.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$name"
	else
		fail "$name"
		printf '%s\n' "$out" | tail -40 | sed 's/^/     /'
	fi
}
step() { echo "== $* ($(($(date +%s) - start))s)"; }
finish() {
	step "done"
	for f in "${failures[@]+"${failures[@]}"}"; do
		echo "failed: $f"
	done
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

export DEBIAN_FRONTEND=noninteractive
step "installing build and check tools"
pkgs=(build-essential debhelper dpkg-dev fakeroot meson ninja-build pkgconf git
	libmicrohttpd-dev libjansson-dev libsystemd-dev libinih-dev libcmocka-dev
	libcurl4-openssl-dev scdoc systemd man-db prometheus python3 lintian)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	echo "installing ${missing[*]}"
	apt-get update -q >/dev/null || true
fi
check "apt-get install packaging tools" \
	apt-get install -y --no-install-recommends "${pkgs[@]}"
[ "$failed" -eq 0 ] || finish

# dpkg-buildpackage needs debian/ at the source root: build in a copy of the tree (tracked and
# untracked-but-not-ignored files, so no build directories) with packaging/debian moved there.
work=$(mktemp -d /tmp/umd-packaging.XXXXXX)
chmod 0755 "$work" # the umd user runs the installed daemon on a state dir in here
trap 'rm -rf "$work"' EXIT
src=$work/umd
mkdir -p "$src"
step "copying the tree to $src"
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
	git -C "$root" ls-files -z --cached --others --exclude-standard |
		(cd "$root" && xargs -0 cp -a --parents -t "$src" 2>/dev/null)
	# git describe in the copy gives the package the same build id as the tree.
	cp -a "$(git -C "$root" rev-parse --absolute-git-dir)" "$src/.git"
else
	tar -C "$root" --exclude='./build*' --exclude='./obj-*' -cf - . | tar -C "$src" -xf -
fi
mv "$src/packaging/debian" "$src/debian"

step "dpkg-buildpackage -b -us -uc"
# DEB_BUILD_PROFILES from the environment wins (pkg.umd.nocuda: a worker without CUDA).
profiles=${DEB_BUILD_PROFILES-}
if [ -z "${DEB_BUILD_PROFILES+set}" ] && ! command -v nvcc >/dev/null &&
	[ ! -x /usr/local/cuda/bin/nvcc ]; then
	echo "no nvcc on this machine: building with DEB_BUILD_PROFILES=pkg.umd.nocuda"
	profiles=pkg.umd.nocuda
fi
# DEB_BUILD_OPTIONS from the environment is kept (tests/run-all passes nocheck: it ran the unit
# suite, which the package build would run again, on the same tree).
if (cd "$src" && DEB_BUILD_PROFILES=$profiles \
	DEB_BUILD_OPTIONS="${DEB_BUILD_OPTIONS:+$DEB_BUILD_OPTIONS }parallel=$(nproc)" \
	dpkg-buildpackage -b -us -uc) >"$work/build.log" 2>&1; then
	ok "dpkg-buildpackage builds the package"
else
	fail "dpkg-buildpackage builds the package"
	grep -E 'error|FAILED|undefined reference' "$work/build.log" | cut -c1-300 | head -40 |
		sed 's/^/     /'
	echo "     (full log: $work/build.log is removed on exit; rerun to see it)"
	finish
fi
deb=$(ls "$work"/umd_*.deb 2>/dev/null | head -1)
check "one umd_*.deb built" test -f "$deb"
[ -f "$deb" ] || finish
echo "built $(basename "$deb"), $(stat -c %s "$deb") bytes"

files=(
	/usr/sbin/umd
	/usr/libexec/umd-worker
	/lib/systemd/system/umd.service
	/lib/systemd/system/umd.socket
	/lib/systemd/system/umd-healthcheck.service
	/lib/systemd/system/umd-healthcheck.timer
	/usr/lib/sysusers.d/umd.conf
	/usr/lib/tmpfiles.d/umd.conf
	/etc/umd/umd.conf
	/etc/umd/gpu-models.conf
	/usr/share/man/man8/umd.8.gz
	/usr/share/man/man5/umd.conf.5.gz
	/usr/share/man/man8/umd-worker.8.gz
	/usr/share/man/man8/umd-healthcheck.8.gz
	/usr/share/man/man1/umdctl.1.gz
	/usr/share/doc/umd/copyright
	/usr/bin/umdctl
	/usr/share/bash-completion/completions/umdctl
	/usr/sbin/umd-healthcheck
	/usr/libexec/umd/slurm-healthcheck
	/usr/libexec/umd/slurm-prolog
	/usr/libexec/umd/slurm-epilog
	/etc/nhc/scripts/umd.nhc
	/usr/share/umd/prometheus/alerts.yml
	/usr/share/umd/prometheus/scrape.yml
	/usr/share/umd/prometheus/alerts_test.yml
	/usr/share/umd/prometheus/fleet.yml
	/usr/share/umd/prometheus/fleet_test.yml
	/usr/share/umd/grafana/umd.json
	/usr/share/umd/grafana/umd-fleet.json
)
listing=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
for f in "${files[@]}"; do
	check "package holds $f" grep -qx "$f" <<<"$listing"
done
check "/etc/umd/umd.conf is a conffile" \
	sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xOf - ./conffiles | grep -qx /etc/umd/umd.conf"
check "shipped umd.conf is the tree's etc/umd.conf" \
	sh -c "dpkg-deb --fsys-tarfile '$deb' | tar -xOf - ./etc/umd/umd.conf | cmp - '$root/etc/umd.conf'"

step "lintian"
# Errors and warnings fail; info and pedantic tags are shown but do not.
if out=$(lintian --fail-on error,warning --display-info "$deb" 2>&1); then
	ok "lintian: no errors or warnings"
else
	fail "lintian: no errors or warnings"
fi
[ -n "$out" ] && printf '%s\n' "$out" | head -30 | sed 's/^/     /'

step "apt-get install ./$(basename "$deb")"
check "apt-get install the package" apt-get install -y "$deb"
for f in "${files[@]}"; do
	check "installed $f" test -e "$f"
done
check "executables are executable" test -x /usr/sbin/umd -a -x /usr/libexec/umd-worker \
	-a -x /usr/bin/umdctl -a -x /usr/sbin/umd-healthcheck -a -x /usr/libexec/umd/slurm-healthcheck
check "/etc/nhc/scripts/umd.nhc is a conffile" \
	sh -c "dpkg-deb --ctrl-tarfile '$deb' | tar -xOf - ./conffiles | grep -qx /etc/nhc/scripts/umd.nhc"
check "system user umd made by sysusers" sh -c 'getent passwd umd | grep -q ":/var/lib/umd:"'
check "/var/lib/umd made by tmpfiles, owned by umd, mode 0750" \
	sh -c '[ "$(stat -c "%U %a" /var/lib/umd)" = "umd 750" ]'
check "umd --version runs" /usr/sbin/umd --version
/usr/sbin/umd --version 2>&1 | sed 's/^/     /'
check "umd accepts the installed /etc/umd/umd.conf" /usr/sbin/umd --check-config
check "umd-worker runs (--fake 2 --list)" \
	sh -c '/usr/libexec/umd-worker --fake 2 --list | grep -q "\"fake\": *true"'
check "man umd and man umd.conf render" sh -c 'man -P cat umd >/dev/null && man -P cat umd.conf >/dev/null'
check "man umdctl, umd-worker and umd-healthcheck render" \
	sh -c 'man -P cat umdctl >/dev/null && man -P cat umd-worker >/dev/null && man -P cat umd-healthcheck >/dev/null'

# The installed daemon, as the umd user, finds its installed worker by default and serves.
port=$((20000 + RANDOM % 20000))
http_get() { # URL: prints "STATUS BODY"; fails when nothing answers
	python3 -c 'import sys, urllib.request as u
try:
    r = u.urlopen(sys.argv[1], timeout=2)
except u.HTTPError as e:
    r = e
sys.stdout.write(str(r.status) + " " + r.read().decode())' "$1"
}
wait_http() { # URL SECONDS
	local deadline=$((SECONDS + $2))
	while [ "$SECONDS" -lt "$deadline" ]; do
		http_get "$1" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	return 1
}
health_is_200() { http_get "http://127.0.0.1:$1/v1/health" | grep -q '^200 '; }
fake_devices_are() { # PORT N
	[ "$(http_get "http://127.0.0.1:$1/v1/devices" | grep -o '"fake": *true' | wc -l)" -eq "$2" ]
}
step "running the installed umd with 2 fake devices on 127.0.0.1:$port"
state=$work/state
install -d -o umd -g umd -m 0750 "$state"
setpriv --reuid=umd --regid=umd --init-groups -- /usr/sbin/umd --fake-devices 2 --listen "127.0.0.1:$port" --state-dir "$state" \
	>"$work/umd.log" 2>&1 &
umd_pid=$!
if wait_http "http://127.0.0.1:$port/v1/health" 20; then
	ok "installed umd serves HTTP, finding its worker in /usr/libexec"
	check "installed umd answers /v1/health 200" health_is_200 "$port"
	check "installed umd lists 2 fake devices" fake_devices_are "$port" 2
	check "installed umdctl runs a job and prints its table" \
		sh -c "/usr/bin/umdctl --url http://127.0.0.1:$port submit copy --wait | grep -q '^job .* succeeded'"
	# Two fake GPUs give three lines: each GPU, and the GPU pairs (peer copies).
	check "installed umd-healthcheck passes both fake GPUs and their pair" \
		sh -c "/usr/sbin/umd-healthcheck --url http://127.0.0.1:$port | grep -c PASS | grep -qx 3"
else
	fail "installed umd serves HTTP, finding its worker in /usr/libexec"
	sed 's/^/     /' "$work/umd.log" | tail -20
fi
kill -TERM "$umd_pid" 2>/dev/null
if wait "$umd_pid"; then
	ok "installed umd exits 0 on SIGTERM"
else
	fail "installed umd exits 0 on SIGTERM (exit $?)"
	tail -5 "$work/umd.log" | sed 's/^/     /'
fi

# Socket activation the way systemd does it (LISTEN_FDS, LISTEN_PID): systemd-socket-activate
# binds the port and starts umd on the first connection with the socket passed. As with
# umd.socket and the default umd.conf, the passed socket's address is also umd's listen=
# address: umd must serve on the passed socket, not fail binding the address again.
sport=$((port + 1))
step "socket-activating the installed umd on 127.0.0.1:$sport"
setpriv --reuid=umd --regid=umd --init-groups -- systemd-socket-activate -l "127.0.0.1:$sport" -- \
	/usr/sbin/umd --fake-devices 1 --listen "127.0.0.1:$sport" --state-dir "$state" \
	>"$work/umd-sa.log" 2>&1 &
sa_pid=$!
if wait_http "http://127.0.0.1:$sport/v1/health" 20 && health_is_200 "$sport"; then
	ok "socket-activated umd serves on the passed socket (same address as listen=)"
else
	fail "socket-activated umd serves on the passed socket (same address as listen=)"
	sed 's/^/     /' "$work/umd-sa.log" | tail -20
fi
kill -TERM "$sa_pid" 2>/dev/null
wait "$sa_pid" 2>/dev/null

step "systemd-analyze on the installed units"
check "systemd-analyze verify umd.service umd.socket and the health-check timer" \
	systemd-analyze verify /lib/systemd/system/umd.service /lib/systemd/system/umd.socket \
	/lib/systemd/system/umd-healthcheck.service /lib/systemd/system/umd-healthcheck.timer
score_line=$(systemd-analyze security --offline=yes umd.service 2>&1 | grep 'Overall exposure level')
echo "$score_line"
score=$(sed -n 's/.*: \([0-9.]*\) .*/\1/p' <<<"$score_line")
check "security exposure ${score:-?} <= 2.0" awk -v s="${score:-99}" 'BEGIN { exit !(s <= 2.0) }'

step "promtool"
prom=$root/packaging/prometheus
check "promtool check rules alerts.yml" promtool check rules "$prom/alerts.yml"
check "promtool check config scrape.yml" promtool check config "$prom/scrape.yml"
check "promtool test rules alerts_test.yml" promtool test rules "$prom/alerts_test.yml"
check "promtool check rules fleet.yml" promtool check rules "$prom/fleet.yml"
check "promtool test rules fleet_test.yml" promtool test rules "$prom/fleet_test.yml"

step "apt-get remove, then purge"
install -d -o umd -g umd /var/lib/umd/jobs
echo '{"marker": true}' >/var/lib/umd/jobs/ci-marker.json
check "apt-get remove umd" apt-get remove -y umd
check "remove: /usr/sbin/umd is gone" test ! -e /usr/sbin/umd
check "remove: units are gone" test ! -e /lib/systemd/system/umd.service
check "remove: /var/lib/umd and its results are kept" test -f /var/lib/umd/jobs/ci-marker.json
check "remove: /etc/umd/umd.conf (conffile) is kept" test -f /etc/umd/umd.conf
check "apt-get purge umd" apt-get purge -y umd
check "purge: /var/lib/umd is gone" test ! -e /var/lib/umd
check "purge: /etc/umd is gone" test ! -e /etc/umd
check "purge: dpkg forgets umd" sh -c '! dpkg -s umd >/dev/null 2>&1'

finish
