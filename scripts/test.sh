#!/usr/bin/env bash
# The tests, on a fresh Debian 12 machine with Rust, in one command: installs what
# they drive where it is missing (MariaDB's server binaries with galera-4,
# mariadb-backup and socat; PHP-FPM and the PHP CLI; promtool, the Python
# Prometheus client, Chromium and Playwright; RabbitMQ and NATS), starts RabbitMQ
# and NATS where they are not answering, then runs `cargo test --locked`. Installing
# takes root or sudo; on a machine that has it all, nothing is installed.
#
#   scripts/test.sh                            # set up, then every test
#   scripts/test.sh --test it -- engine::lease::  # set up, then these (cargo test's arguments)
#   scripts/test.sh --setup                    # set up only (.ci/run, before its other steps)
#
# It sets CI=1 (unless CI is set): with every tool installed, a test whose tool is
# missing fails instead of saying it skipped (tests/it/support/tools.rs).
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$HOME/.cargo/bin:$PATH:/usr/sbin:/usr/local/sbin"
export CI=${CI:-1}
cache="${TABLEQ_CI_CACHE:-$HOME/.cache/tableq-ci}"

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
updated=""
# apt_install WHY PACKAGE...: installs the packages (Debian's), saying why.
apt_install() {
  local why=$1
  shift
  echo "--> installing $why"
  if [ -z "$updated" ]; then
    as_root apt-get update -qq
    updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

command -v cargo >/dev/null || {
  echo "cargo not found: install Rust (stable) with rustup: https://rustup.rs" >&2
  exit 1
}
# A C compiler (ring's build script) and git (the tests read the repository with it).
command -v cc >/dev/null || apt_install "a C compiler" gcc libc6-dev
command -v git >/dev/null || apt_install "git" git

# The tests start private, throwaway MariaDB servers: they need the server binaries.
if ! command -v mariadbd >/dev/null || ! command -v mariadb-install-db >/dev/null; then
  apt_install "MariaDB" mariadb-server mariadb-client
fi
# The galera tests start a real 3-node Galera cluster on loopback (tests/it/support/galera.rs):
# galera-4's provider, mariadb-backup for a state transfer, and socat, which the transfer
# script streams with.
if [ ! -e /usr/lib/galera/libgalera_smm.so ] || ! command -v mariadb-backup >/dev/null \
  || ! command -v socat >/dev/null; then
  apt_install "galera-4, mariadb-backup and socat" galera-4 mariadb-backup socat
fi
# promtool checks the alerting rules and a live /metrics (Debian's prometheus package
# ships it); the Python client's strict OpenMetrics parser (python3-prometheus-client)
# checks the OpenMetrics answer; the status page's browser test drives headless
# Chromium; the schema test makes a virtual environment (python3-venv).
if ! command -v promtool >/dev/null || ! command -v chromium >/dev/null \
  || ! /usr/bin/python3 -c 'import prometheus_client.openmetrics.parser' 2>/dev/null \
  || ! /usr/bin/python3 -m venv --help >/dev/null 2>&1 || ! /usr/bin/python3 -c 'import ensurepip' 2>/dev/null; then
  apt_install "promtool (prometheus), python3-prometheus-client, python3-venv and chromium" \
    prometheus python3-prometheus-client python3-venv chromium
fi
# The console's browser test drives that Chromium with Playwright (PyPI), from a
# virtual environment in the cache (tests/it/support/tools.rs finds it there); it
# uses the system's Chromium, so Playwright's own browsers are not downloaded.
playwright_venv="$cache/venv"
if ! "$playwright_venv/bin/python" -c 'import playwright.sync_api' 2>/dev/null; then
  echo "--> installing Playwright in $playwright_venv"
  /usr/bin/python3 -m venv "$playwright_venv"
  "$playwright_venv/bin/pip" install -q playwright
fi
# The fastcgi tests start a private PHP-FPM pool (php-fpm8.2, no php.ini); the worker
# tests, config/email-worker.toml and the handler benchmark run the PHP CLI; the
# handler benchmark's pool loads PDO MySQL (php8.2-mysql), which a test checks.
if [ ! -x /usr/sbin/php-fpm8.2 ] || ! command -v php8.2 >/dev/null \
  || ! compgen -G "/usr/lib/php/*/pdo_mysql.so" >/dev/null; then
  apt_install "PHP-FPM, the PHP CLI and PDO MySQL" php8.2-fpm php8.2-cli php8.2-mysql
fi
# The framework tests (tests/it/frameworks/) build a minimal Laravel 8 app and a minimal
# Symfony 5.4 app on Debian's packages, dispatch with each framework's own API and run
# the bridges in bridges/ under tableq: Laravel's queue, database and console parts,
# Symfony Messenger with its Doctrine transport over Doctrine DBAL (Debian 12 has no
# DoctrineBundle: the Symfony app registers its part), the framework bundle and the
# console.
if [ ! -e /usr/share/php/Illuminate/Queue/Worker.php ] \
  || [ ! -e /usr/share/php/Symfony/Component/Messenger/Bridge/Doctrine/Transport/Connection.php ] \
  || [ ! -e /usr/share/php/Symfony/Bundle/FrameworkBundle/FrameworkBundle.php ] \
  || [ ! -e /usr/share/php/Doctrine/DBAL/DriverManager.php ] \
  || [ ! -e /usr/share/php/Doctrine/Persistence/ConnectionRegistry.php ] \
  || ! compgen -G "/usr/lib/php/*/pdo_sqlite.so" >/dev/null; then
  apt_install "Laravel 8 and Symfony Messenger 5.4 (Debian's packages)" \
    php-laravel-framework php-symfony-messenger php-symfony-doctrine-messenger \
    php-symfony-framework-bundle php-symfony-console php-doctrine-dbal php-doctrine-persistence \
    php8.2-mbstring php8.2-xml php8.2-sqlite3
fi
# The amqp and nats tests publish to the brokers this machine runs: RabbitMQ on
# 127.0.0.1:5672 (guest/guest) and NATS with JetStream on 127.0.0.1:4222. Install
# them if missing, and start each one that is not answering.
answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for_port() {  # PORT NAME: up to 60 s
  for _ in $(seq 1 120); do answers "$1" && return 0; sleep 0.5; done
  echo "$2 is not answering on 127.0.0.1:$1" >&2; return 1
}
if ! command -v rabbitmq-server >/dev/null || ! command -v nats-server >/dev/null; then
  apt_install "RabbitMQ and NATS" rabbitmq-server nats-server
fi
if ! answers 5672; then
  echo "--> starting RabbitMQ"
  as_root rabbitmq-server -detached
  as_root timeout 120 rabbitmqctl await_startup >/dev/null 2>&1 || true
  wait_for_port 5672 RabbitMQ
fi
if ! answers 4222; then
  echo "--> starting NATS with JetStream"
  nats_dir="$cache/nats"
  mkdir -p "$nats_dir"
  nohup nats-server -js -a 127.0.0.1 -p 4222 -sd "$nats_dir" >"$nats_dir/nats.log" 2>&1 &
  wait_for_port 4222 NATS
fi

[ "${1:-}" = "--setup" ] && exit 0
echo "--> cargo test --locked $*"
exec cargo test --locked "$@"
