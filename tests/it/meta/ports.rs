//! The private MariaDB servers the scripts (scripts/lib/mariadb.sh) and the tests
//! (support::mariadb) start take a port below Linux's ephemeral range, where no
//! client connection of the suite can take it first, and try another when another
//! process took theirs between the look and the bind.

use std::net::TcpListener;
use std::path::PathBuf;
use std::time::Duration;

use crate::support::daemon::run_to_end;
use crate::support::{free_port, MariaDb};

/// The ports the harness hands out lie below the ephemeral range (32768–60999).
#[test]
fn free_ports_lie_below_the_ephemeral_range() {
    for _ in 0..100 {
        let port = free_port();
        assert!((20_000..32_000).contains(&port), "{port}");
    }
}

/// The tests' private server, whose first port is taken when it binds, starts on
/// another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tests_server_tries_another_port_when_its_own_is_taken() {
    let holder = TcpListener::bind(("127.0.0.1", free_port())).unwrap();
    let taken = holder.local_addr().unwrap().port();
    let server = tokio::task::spawn_blocking(move || {
        let mut ports = std::iter::once(taken).chain(std::iter::repeat_with(free_port));
        MariaDb::start_trying(&[], move || ports.next().unwrap())
    })
    .await
    .unwrap();
    assert_ne!(server.port(), taken);
    let mut conn = crate::support::connect(&server.base_url()).await;
    let one: Option<i64> = mysql_async::prelude::Queryable::query_first(&mut conn, "SELECT 1")
        .await
        .unwrap();
    assert_eq!(one, Some(1));
    drop(holder);
}

/// scripts/lib/mariadb.sh's private server (the demo's, the benchmarks'), whose
/// first port is taken when it binds, starts on another.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scripts_server_tries_another_port_when_its_own_is_taken() {
    let holder = TcpListener::bind(("127.0.0.1", free_port())).unwrap();
    let taken = holder.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    // free_port as the library has it, but the taken port first.
    let script = r#"
        set -euo pipefail
        source scripts/lib/mariadb.sh
        eval "any_$(declare -f free_port)"
        free_port() {
          echo offer >>"$DIR/offers"
          if [ "$(wc -l <"$DIR/offers")" = 1 ]; then echo "$TAKEN"; else any_free_port; fi
        }
        trap stop_private_mariadb EXIT
        start_private_mariadb "$DIR/mariadb"
        echo "$PRIVATE_MARIADB_URL $(wc -l <"$DIR/offers")"
    "#;
    let mut bash = tokio::process::Command::new("bash");
    bash.args(["-c", script])
        .current_dir(PathBuf::from(env!("CARGO_MANIFEST_DIR")))
        .env("DIR", dir.path())
        .env("TAKEN", taken.to_string())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let done = run_to_end(bash, Duration::from_secs(120)).await;
    assert_eq!(done.code(), Some(0), "{}{}", done.stdout, done.stderr);
    let (url, offers) = done.stdout.trim().rsplit_once(' ').unwrap();
    assert_eq!(offers, "2", "{}", done.stdout);
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    assert_ne!(port, taken);
    assert!(port < 32_768, "{port}");
    drop(holder);
}
