#!/usr/bin/env bash
# The frameworks benchmark (issue 46): the same jobs, each one UPDATE of its own
# counter row, worked by K PHP processes (K = 1, 4, 16) four ways:
#
#   laravel  php artisan queue:work database      (K processes)   Laravel's own worker
#   tableq   tableq new laravel --workers K       (K tableq:work)  the Laravel bridge
#   symfony  bin/console messenger:consume async  (K processes)   Messenger's own consumer
#   tableq   tableq new symfony --workers K       (K tableq:consume) the Symfony bridge
#
# and prints, per run, items/s (from the workers' start to the queue's last row gone),
# the server's row-lock waits (Innodb_row_lock_waits) and deadlocks (INNODB_METRICS
# lock_deadlocks; the last one's text is kept in DEADLOCKS_DIR) over the run, the
# framework's workers that died and were started again (messenger:consume dies on a
# deadlock; supervisor would restart it), the statements sent per job (Questions),
# then tableq's throughput over the framework's per K. Not part of CI. It is written up in
# docs/src/explanation/performance.md ("Laravel's and Symfony's own workers").
#
#   bench/frameworks/run.sh                  # 5,000 jobs per run, K = 1 4 16
#   JOBS=2000 KS="1 4" bench/frameworks/run.sh
#   JOBS_K16=2000 bench/frameworks/run.sh    # fewer jobs in the K = 16 runs
#   SIDES="laravel" bench/frameworks/run.sh  # one framework (laravel, symfony)
#
# What it sets up, in a temporary directory it removes at the end:
#   - a private MariaDB (mariadbd --no-defaults, its own datadir and port; durable
#     commits: innodb_flush_log_at_trx_commit=1, the server's default);
#   - the two minimal apps of the integration tests (tests/it/support/apps/laravel and
#     symfony, built as tests/it/support/laravel.rs and symfony.rs build them: Debian's
#     Laravel 8.83 and Symfony 5.4, the bridges through their autoload.php), plus a
#     bench job (App\Jobs\BenchJob) and message (App\Message\BenchMe) whose handler runs
#     `UPDATE bench_counts SET n = n + 1 WHERE k = ?`;
#   - each framework's queue tables from its own migrations (queue:table /
#     messenger:setup-transports), plus the index `tableq check` asks for, used by
#     both sides: jobs (queue, reserved_at), messenger_messages (queue_name, available_at).
#
# The jobs are dispatched with the framework's own API before a run starts, so both
# sides start on a full table. The framework's workers run with their defaults
# (queue:work --sleep=3 --tries=1, messenger:consume --sleep=1): they only sleep when
# they find nothing, i.e. at the end, and are stopped (SIGTERM) as soon as the queue is
# empty; so is tableq. Every run checks that each counter was bumped exactly once
# ("twice" counts the jobs run more than once).
#
# tableq is the release build: TABLEQ_BIN=path/to/tableq, else
# `cargo build --release --locked` (CARGO_TARGET_DIR is honoured).
# Needs php8.2-cli, php8.2-mysql, php-laravel-framework, php-symfony-framework-bundle,
# php-symfony-console, php-symfony-messenger, php-symfony-doctrine-messenger,
# php-doctrine-dbal, php-doctrine-persistence, mariadb-server (scripts/test.sh's list).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
source scripts/lib/mariadb.sh # start_private_mariadb, stop_private_mariadb

JOBS=${JOBS:-5000}
JOBS_K16=${JOBS_K16:-$JOBS}
KS=${KS:-1 4 16}
SIDES=${SIDES:-laravel symfony}
PHP=$(command -v php8.2 || command -v php)

WORK=$(mktemp -d /tmp/tableq-bench-frameworks.XXXXXX)
WORKER_PIDS=()
cleanup() {
    declare -F stop_side >/dev/null && stop_side
    stop_private_mariadb
    [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

if [ -n "${TABLEQ_BIN:-}" ]; then
    TABLEQ=$TABLEQ_BIN
else
    cargo build --release --locked --quiet --bin tableq
    TABLEQ="${CARGO_TARGET_DIR:-target}/release/tableq"
fi

start_private_mariadb "$WORK/mariadb"
PORT=${PRIVATE_MARIADB_URL##*:}
root_sql() { mariadb --no-defaults -uroot -h127.0.0.1 -P"$PORT" -N -B "$@"; }
root_sql -e "CREATE DATABASE laravel; CREATE DATABASE symfony;
             SET GLOBAL innodb_monitor_enable = 'lock_deadlocks'"

# ---------------------------------------------------------------------------------
# The Laravel app: support::laravel's build, with .env and a bench job.
LARAVEL=$WORK/laravel
LARAVEL_URL="mysql://root@127.0.0.1:$PORT/laravel"
# What `composer install` would give the app, as support::laravel writes it: Laravel
# (Debian's), the bridge through its autoload.php, and App\.
laravel_autoload() {
    rm -rf "$LARAVEL/vendor/composer"
    cat >"$LARAVEL/vendor/autoload.php" <<EOF
<?php
require_once '/usr/share/php/Illuminate/autoload.php';
require_once '$ROOT/bridges/laravel/autoload.php';
spl_autoload_register(static function (string \$class): void {
    if (strncmp(\$class, 'App\\\\', 4) === 0) {
        \$file = dirname(__DIR__).'/app/'.str_replace('\\\\', '/', substr(\$class, 4)).'.php';
        if (is_file(\$file)) {
            require \$file;
        }
    }
});
EOF
}

build_laravel() {
    cp -r tests/it/support/apps/laravel "$LARAVEL"
    mkdir -p "$LARAVEL/bootstrap/cache" "$LARAVEL/storage/logs" "$LARAVEL/vendor"
    laravel_autoload
    echo "DATABASE_URL=$LARAVEL_URL" >"$LARAVEL/.env"
    cat >"$LARAVEL/app/Jobs/BenchJob.php" <<'EOF'
<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use Illuminate\Support\Facades\DB;

class BenchJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public $key;

    public function __construct(string $key)
    {
        $this->key = $key;
    }

    public function handle()
    {
        DB::update('UPDATE bench_counts SET n = n + 1 WHERE k = ?', [$this->key]);
    }
}
EOF
    # Each runs `composer dump-autoload` where Composer is installed, which writes a
    # vendor/autoload.php of its own: ours again after each.
    for command in queue:table queue:failed-table; do
        (cd "$LARAVEL" && "$PHP" artisan "$command" >/dev/null)
        laravel_autoload
    done
    (cd "$LARAVEL" && "$PHP" artisan migrate --force >/dev/null)
    root_sql laravel -e "CREATE INDEX jobs_queue_reserved_at ON jobs (queue, reserved_at);
                         CREATE TABLE bench_counts (k VARCHAR(64) PRIMARY KEY, n INT NOT NULL DEFAULT 0)"
}

# ---------------------------------------------------------------------------------
# The Symfony app: support::symfony's build, with a bench message, its handler and a
# command that dispatches N of them in one transaction.
SYMFONY=$WORK/symfony
SYMFONY_URL="mysql://root@127.0.0.1:$PORT/symfony"
console() { (cd "$SYMFONY" && DATABASE_URL=$SYMFONY_URL "$PHP" -d date.timezone=UTC bin/console "$@"); }
build_symfony() {
    cp -r tests/it/support/apps/symfony "$SYMFONY"
    ln -s "$ROOT/bridges/symfony" "$SYMFONY/bridge"
    cat >"$SYMFONY/src/Message/BenchMe.php" <<'EOF'
<?php

namespace App\Message;

final class BenchMe
{
    public $key;

    public function __construct(string $key)
    {
        $this->key = $key;
    }
}
EOF
    cat >"$SYMFONY/src/MessageHandler/BenchMeHandler.php" <<'EOF'
<?php

namespace App\MessageHandler;

use App\Message\BenchMe;
use Doctrine\DBAL\Connection;
use Symfony\Component\Messenger\Handler\MessageHandlerInterface;

final class BenchMeHandler implements MessageHandlerInterface
{
    private $db;

    public function __construct(Connection $db)
    {
        $this->db = $db;
    }

    public function __invoke(BenchMe $message): void
    {
        $this->db->executeStatement('UPDATE bench_counts SET n = n + 1 WHERE k = ?', [$message->key]);
    }
}
EOF
    cat >"$SYMFONY/src/Command/BenchDispatchCommand.php" <<'EOF'
<?php

namespace App\Command;

use App\Message\BenchMe;
use Doctrine\DBAL\Connection;
use Symfony\Component\Console\Command\Command;
use Symfony\Component\Console\Input\InputArgument;
use Symfony\Component\Console\Input\InputInterface;
use Symfony\Component\Console\Output\OutputInterface;
use Symfony\Component\Messenger\MessageBusInterface;

/** `app:bench-dispatch N`: $bus->dispatch(new BenchMe("BenchMe-n")) N times, in one transaction. */
final class BenchDispatchCommand extends Command
{
    protected static $defaultName = 'app:bench-dispatch';

    private $bus;
    private $db;

    public function __construct(MessageBusInterface $bus, Connection $db)
    {
        $this->bus = $bus;
        $this->db = $db;
        parent::__construct();
    }

    protected function configure(): void
    {
        $this->addArgument('count', InputArgument::REQUIRED);
    }

    protected function execute(InputInterface $input, OutputInterface $output): int
    {
        $this->db->beginTransaction();
        for ($n = 1; $n <= (int) $input->getArgument('count'); ++$n) {
            $this->bus->dispatch(new BenchMe("BenchMe-$n"));
        }
        $this->db->commit();

        return 0;
    }
}
EOF
    cat >"$SYMFONY/config/packages/bench.php" <<'EOF'
<?php

use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;

return static function (ContainerConfigurator $container): void {
    $container->extension('framework', [
        'messenger' => ['routing' => ['App\Message\BenchMe' => 'async']],
    ]);
};
EOF
    console cache:warmup >/dev/null
    console messenger:setup-transports >/dev/null
    root_sql symfony -e "CREATE INDEX messenger_queue_available ON messenger_messages (queue_name, available_at);
                         CREATE TABLE bench_counts (k VARCHAR(64) PRIMARY KEY, n INT NOT NULL DEFAULT 0)"
}

# ---------------------------------------------------------------------------------
# The server's counters: row-lock waits, deadlocks (status), deadlocks (metrics),
# statements (Questions: every client's, this script's polls of the queue included,
# about one per 0.1 s).
counters() {
    root_sql -e "SELECT
        (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_ROW_LOCK_WAITS'),
        (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_DEADLOCKS'),
        (SELECT COUNT FROM information_schema.INNODB_METRICS WHERE NAME = 'lock_deadlocks'),
        (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'QUESTIONS')"
}

# The rows still to work, per framework (Messenger on MySQL acks by setting
# delivered_at to 9999-12-31 and deletes those rows later: they are done).
pending_laravel() { root_sql laravel -e "SELECT COUNT(*) FROM jobs WHERE queue = 'default'"; }
pending_symfony() {
    root_sql symfony -e "SELECT COUNT(*) FROM messenger_messages WHERE queue_name = 'default'
                         AND (delivered_at IS NULL OR delivered_at < '9999-01-01')"
}

# Fills the queue of framework $1 with $2 jobs, through the framework's dispatch.
fill_laravel() {
    root_sql laravel -e "DELETE FROM jobs; DELETE FROM failed_jobs; TRUNCATE bench_counts;
        INSERT INTO bench_counts (k) SELECT CONCAT('BenchJob-', seq) FROM seq_1_to_$1"
    (cd "$LARAVEL" && "$PHP" artisan app:dispatch BenchJob "$1" >/dev/null)
}
fill_symfony() {
    root_sql symfony -e "DELETE FROM messenger_messages; TRUNCATE bench_counts;
        INSERT INTO bench_counts (k) SELECT CONCAT('BenchMe-', seq) FROM seq_1_to_$1"
    console app:bench-dispatch "$1" >/dev/null
}

# Starts side $2 ("framework" or "tableq") of framework $1 with $3 PHP processes;
# their pids in WORKER_PIDS.
start_side() {
    local framework=$1 side=$2 k=$3 i
    WORKER_PIDS=()
    if [ "$side" = tableq ]; then
        local queue=$WORK/queues-$framework-$k url
        mkdir -p "$queue"
        if [ "$framework" = laravel ]; then
            url=$LARAVEL_URL
            "$TABLEQ" new laravel --queue default --retry-after 90 --workers "$k" \
                --command "$PHP $LARAVEL/artisan tableq:work database --queue=default" >"$queue/default.toml"
        else
            url=$SYMFONY_URL
            "$TABLEQ" new symfony --transport async --workers "$k" \
                --command "env DATABASE_URL=$SYMFONY_URL $PHP -d date.timezone=UTC $SYMFONY/bin/console tableq:consume async" \
                >"$queue/default.toml"
        fi
        "$TABLEQ" run --database-url "$url" "$queue/default.toml" 2>"$WORK/tableq-$framework-$k.log" &
        WORKER_PIDS+=($!)
        return
    fi
    for i in $(seq 1 "$k"); do
        start_framework_worker "$framework"
        WORKER_PIDS+=("$STARTED")
    done
}

# Starts one of framework $1's own workers; its pid in STARTED.
start_framework_worker() {
    if [ "$1" = laravel ]; then
        (cd "$LARAVEL" && exec "$PHP" artisan queue:work database --queue=default) \
            >/dev/null 2>>"$WORK/queue-work.log" &
    else
        (cd "$SYMFONY" && DATABASE_URL=$SYMFONY_URL exec "$PHP" -d date.timezone=UTC bin/console \
            messenger:consume async) >/dev/null 2>>"$WORK/messenger-consume.log" &
    fi
    STARTED=$!
}

stop_side() {
    local pid
    for pid in "${WORKER_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${WORKER_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    WORKER_PIDS=()
}

# One run: framework $1, side $2, K $3, $4 jobs. Writes $WORK/result:
# "framework side k jobs seconds items/s lock_waits deadlocks twice restarts statements/job".
# A framework's worker that dies (messenger:consume does, on a deadlock) is started
# again at once, as supervisor's autorestart would: "restarts" counts them. tableq
# ending early is a failure of the run.
run() {
    local framework=$1 side=$2 k=$3 jobs=$4 before after started ended i restarts=0
    "fill_$framework" "$jobs"
    before=$(counters)
    started=$(date +%s.%N)
    start_side "$framework" "$side" "$k"
    while [ "$("pending_$framework")" != 0 ]; do
        for i in "${!WORKER_PIDS[@]}"; do
            kill -0 "${WORKER_PIDS[$i]}" 2>/dev/null && continue
            if [ "$side" = tableq ]; then
                echo "$framework/tableq K=$k: tableq ended early; see $WORK" >&2
                KEEP_WORK=1
                exit 1
            fi
            wait "${WORKER_PIDS[$i]}" 2>/dev/null || true
            start_framework_worker "$framework"
            WORKER_PIDS[$i]=$STARTED
            restarts=$((restarts + 1))
        done
        sleep 0.1
    done
    ended=$(date +%s.%N)
    after=$(counters)
    declare -F stop_side >/dev/null && stop_side
    if [ "$(root_sql "$framework" -e "SELECT COUNT(*) FROM bench_counts WHERE n = 0")" != 0 ]; then
        echo "$framework/$side K=$k: jobs left unrun; see $WORK" >&2
        KEEP_WORK=1
        exit 1
    fi
    local twice
    twice=$(root_sql "$framework" -e "SELECT COUNT(*) FROM bench_counts WHERE n > 1")
    if [ "$(awk -v a="$after" -v b="$before" 'BEGIN { split(a, x, "\t"); split(b, y, "\t"); print x[3] - y[3] }')" != 0 ]; then
        # The last one InnoDB saw, for the reader (DEADLOCKS_DIR keeps them).
        root_sql -e "SHOW ENGINE INNODB STATUS\G" \
            | sed -n '/LATEST DETECTED DEADLOCK/,/^TRANSACTIONS/p' \
            >"${DEADLOCKS_DIR:-$WORK}/deadlock-$framework-$side-$k.txt"
    fi
    awk -v f="$framework" -v s="$side" -v k="$k" -v n="$jobs" -v t0="$started" -v t1="$ended" \
        -v a="$after" -v b="$before" -v tw="$twice" -v r="$restarts" 'BEGIN {
            split(a, x, "\t"); split(b, y, "\t"); secs = t1 - t0
            printf "%s %s %d %d %.2f %.0f %d %d %d %d %.1f\n", f, s, k, n, secs, n / secs,
                x[1] - y[1], x[3] - y[3], tw, r, (x[4] - y[4]) / n }' >"$WORK/result"
}

for framework in $SIDES; do "build_$framework"; done

echo "Jobs of one UPDATE each, K PHP processes, MariaDB $(root_sql -e 'SELECT VERSION()'), $(nproc) cores:"
printf '%-8s %-17s %3s %6s %8s %8s %11s %10s %6s %9s %15s\n' \
    framework worker K jobs seconds items/s lock_waits deadlocks twice restarts statements/job
declare -A RATE
for framework in $SIDES; do
    for k in $KS; do
        jobs=$JOBS
        [ "$k" = 16 ] && jobs=$JOBS_K16
        for side in framework tableq; do
            run "$framework" "$side" "$k" "$jobs"
            read -r f s kk n secs rate waits deadlocks twice restarts statements <"$WORK/result"
            worker=$s
            if [ "$s" = framework ]; then
                [ "$f" = laravel ] && worker=queue:work || worker=messenger:consume
            fi
            RATE[$f-$s-$kk]=$rate
            printf '%-8s %-17s %3d %6d %8.2f %8d %11d %10d %6d %9d %15s\n' \
                "$f" "$worker" "$kk" "$n" "$secs" "$rate" "$waits" "$deadlocks" "$twice" "$restarts" "$statements"
        done
    done
done
echo
echo "tableq / the framework's own worker, items/s:"
for framework in $SIDES; do
    for k in $KS; do
        awk -v f="$framework" -v k="$k" -v t="${RATE[$framework-tableq-$k]}" -v w="${RATE[$framework-framework-$k]}" \
            'BEGIN { printf "%-8s K=%-3d %.2fx\n", f, k, t / w }'
    done
done
