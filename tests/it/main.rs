//! The integration tests, as one crate (`cargo test` builds `tests/it/` as one test
//! binary). Each file of `tests/` used to be a crate of its own, and each crate is a
//! test binary linked on its own against tableq and every dev-dependency: one link
//! per file. One crate links once. One module per subject; a new test file is a
//! module here. The harness is the module `support`.
//!
//! One process runs every module's tests, so what is process-wide is shared by all
//! of them: the private MariaDB of `support` (one per process), the captured log
//! (`support::logs`: a test reads only its own queue's lines, and gives its queue a
//! name no other test uses), the environment and the working directory. A test
//! that needs the server to itself (it stops it, or reads its global counters)
//! starts a private one of its own; no test changes the process's environment.

mod support;

mod amqp;
mod bad_input;
mod batch_scope;
mod batch_scope_outside;
mod binary_keys;
mod budget;
mod check_batch_scope;
mod check_format;
mod check_index;
mod check_offline;
mod check_proof;
mod check_self_test;
mod check_server;
mod circuit;
mod command_action;
mod command_env;
mod count;
mod count_print_sql;
mod database_url;
mod deploy;
mod email_queue;
mod exactly_once;
mod examples;
mod failed_rows;
mod failures;
mod galera;
mod http_action;
mod idle;
mod isolation;
mod kubernetes;
mod layers;
mod lease;
mod lease_check;
mod lease_connections;
mod lease_time_zone;
mod limits;
mod listener_headers;
mod loader_fuzz;
mod log_escaping;
mod log_lines;
mod loops;
mod man_pages;
mod metrics;
mod metrics_flood;
mod modes;
mod monitoring;
mod nats;
mod notify;
mod observability;
mod otlp;
mod outcome_sql;
mod packet;
mod pause;
mod queue_file_types;
mod queues;
mod reaper;
mod reconnect_jitter;
mod reload;
mod restart;
mod schema;
mod scrape_cost;
mod secret_files;
mod server_full;
mod signals;
mod stall;
mod startup;
mod status_page;
mod status_percentiles;
mod stop_when_empty;
mod trace_context;
mod version;
mod wake;
