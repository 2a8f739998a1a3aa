#!/bin/sh
# Install the Debian packages listed in requirements/system/debian.txt that are missing.
# As root with apt-get: installs them. Otherwise: one line saying the exact command to run, and exit 0, so
# `make test` still runs (the tests that need a missing package skip, naming it; under CI=true they fail).
set -eu
here="$(dirname "$0")"
want="$(sed -e 's/#.*//' "$here/debian.txt" | tr -s ' \t' '\n\n' | grep -v '^$' || true)"
[ -n "$want" ] || exit 0
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "cidermill: not a Debian system; install the equivalents of: $(echo $want) (see requirements/system/debian.txt)"
  exit 0
fi
missing=""
for pkg in $want; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
[ -n "$missing" ] || exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "cidermill: installing system packages:$missing"
  if (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $missing) \
       >/tmp/cidermill-apt.log 2>&1; then
    exit 0
  fi
  echo "cidermill: apt-get could not install$missing (log: /tmp/cidermill-apt.log); the tests that need them will skip"
  exit 0
fi
echo "cidermill: missing system packages:$missing; run: sudo apt-get install -y$missing"
