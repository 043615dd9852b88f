#!/usr/bin/env bash
# Installs the Debian packages the simulated fleet needs (sshd, iproute2, util-linux) when missing,
# and promtool, which the unit tests run on gpufleet's metrics and alert rules (Debian ships it in
# prometheus; without its recommended prometheus-node-exporter), and chromium, the headless browser
# the report.html tests open the page in (Playwright drives it; it never downloads a browser), and
# systemd-analyze, systemd's own verifier of the unit files gpufleet writes (tests/unit/test_systemd_verify.py),
# and the real services tests/conformance starts on loopback addresses and in namespaces the tests create:
# Slurm (slurmctld, slurmd, munge), Prometheus' node_exporter and Alertmanager, lldpd.
set -eu
need=()
command -v /usr/sbin/sshd >/dev/null 2>&1 || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v unshare >/dev/null 2>&1 || need+=(util-linux)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
[ -x /usr/bin/python3 ] || need+=(python3)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/bin/chromium ] || need+=(chromium)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
[ -x /usr/sbin/slurmctld ] || need+=(slurmctld)
[ -x /usr/sbin/slurmd ] || need+=(slurmd)
[ -x /usr/sbin/munged ] || need+=(munge)
[ -x /usr/bin/prometheus-node-exporter ] || need+=(prometheus-node-exporter)
[ -x /usr/bin/prometheus-alertmanager ] || need+=(prometheus-alertmanager)
[ -x /usr/sbin/lldpd ] || need+=(lldpd)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "error: the simulated fleet and the tests need: ${need[*]} (run as root, or install them)" >&2; exit 2
fi
echo "installing ${need[*]} ..."
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# The tests start these daemons themselves: the packages must not start them on the machine. A
# policy-rc.d that refuses every start is written only for the install, and only when none exists.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 0755 "$policy" && own_policy=1
fi
trap 'if [ "$own_policy" -eq 1 ]; then rm -f "$policy"; fi' EXIT
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
