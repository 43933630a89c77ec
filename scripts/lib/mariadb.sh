# Shell helpers shared by demo.sh and bench.sh: a private, throwaway MariaDB, and a
# `mariadb` client pointed at a mysql:// URL. Source this file; it defines functions.

# mariadbd lives in /usr/sbin, which is not always on PATH.
PATH="$PATH:/usr/sbin:/usr/local/sbin"

# free_port: prints a TCP port on 127.0.0.1 that nothing listens on just now, below
# Linux's ephemeral range (32768-60999): the kernel never gives one of those to a
# client connection (a test suite makes thousands), so none takes it between this
# look and the server's bind. Another process picking the same port at the same
# moment still can: start_private_mariadb then tries another.
free_port() {
  local port _
  for _ in $(seq 1 1000); do
    port=$((20000 + RANDOM % 12000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  echo "no free port between 20000 and 31999" >&2
  return 1
}

# start_private_mariadb DIR: installs a datadir under DIR, starts mariadbd on a free
# port (another, up to 10 times, when that one was taken meanwhile), waits until it
# answers, and sets PRIVATE_MARIADB_URL (no database) and PRIVATE_MARIADB_PID. Stop
# it with stop_private_mariadb.
start_private_mariadb() {
  local dir=$1 user_flag=() _
  command -v mariadbd >/dev/null || { echo "mariadbd not found: install mariadb-server" >&2; return 1; }
  [ "$(id -u)" = 0 ] && user_flag=(--user=root)
  mkdir -p "$dir"
  mariadb-install-db --no-defaults --datadir="$dir/data" --auth-root-authentication-method=normal \
    --skip-test-db "${user_flag[@]}" >"$dir/install.log" 2>&1 \
    || { cat "$dir/install.log" >&2; return 1; }
  for _ in $(seq 1 10); do
    local started=0
    start_mariadb_on "$dir" "$(free_port)" || started=$?
    # 2: the port was taken between free_port and the bind.
    [ "$started" = 2 ] || return "$started"
  done
  echo "mariadbd found no free port in 10 tries; see $dir/error.log" >&2
  return 1
}

# start_mariadb_on DIR PORT: starts mariadbd on PORT and waits until it answers.
# Returns 2 when another process has the port, 1 on any other failure.
start_mariadb_on() {
  local dir=$1 port=$2 user_flag=() i
  [ "$(id -u)" = 0 ] && user_flag=(--user=root)
  rm -f "$dir/error.log"
  mariadbd --no-defaults --datadir="$dir/data" --port="$port" --bind-address=127.0.0.1 \
    --socket="$dir/mysqld.sock" --pid-file="$dir/mysqld.pid" --log-error="$dir/error.log" \
    --skip-name-resolve --innodb-buffer-pool-size=256M --innodb-log-file-size=64M \
    --max-connections=1000 "${user_flag[@]}" "${PRIVATE_MARIADB_ARGS[@]}" 2>/dev/null &
  PRIVATE_MARIADB_PID=$!
  PRIVATE_MARIADB_URL="mysql://root@127.0.0.1:$port"
  for i in $(seq 1 600); do
    # Through its own socket: the port may be another process's.
    if mariadb --no-defaults -uroot --socket="$dir/mysqld.sock" -e 'SELECT 1' >/dev/null 2>&1; then
      return 0
    fi
    if ! kill -0 "$PRIVATE_MARIADB_PID" 2>/dev/null; then
      wait "$PRIVATE_MARIADB_PID" 2>/dev/null || true
      PRIVATE_MARIADB_PID=
      grep -q "Address already in use" "$dir/error.log" 2>/dev/null && return 2
      cat "$dir/error.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "mariadbd did not start; see $dir/error.log" >&2
  return 1
}

stop_private_mariadb() {
  if [ -n "${PRIVATE_MARIADB_PID:-}" ]; then
    kill "$PRIVATE_MARIADB_PID" 2>/dev/null || true
    wait "$PRIVATE_MARIADB_PID" 2>/dev/null || true
    PRIVATE_MARIADB_PID=
  fi
}

# sql URL [ARGS...]: runs the mariadb client against a mysql://user:pass@host:port/db
# URL; SQL comes from stdin or -e.
sql() {
  local url=$1; shift
  local rest=${url#*://} creds hostpart user pass host port db
  rest=${rest%%\?*}
  if [[ $rest == *@* ]]; then creds=${rest%@*}; hostpart=${rest##*@}; else creds=; hostpart=$rest; fi
  user=${creds%%:*}; pass=; [[ $creds == *:* ]] && pass=${creds#*:}
  db=; [[ $hostpart == */* ]] && db=${hostpart#*/}
  hostpart=${hostpart%%/*}
  host=${hostpart%%:*}; port=3306; [[ $hostpart == *:* ]] && port=${hostpart##*:}
  MYSQL_PWD=$pass mariadb --no-defaults -h"$host" -P"$port" -u"${user:-root}" ${db:+"$db"} "$@"
}
