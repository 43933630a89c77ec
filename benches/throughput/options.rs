//! The benchmark's command line: its flags, their defaults (smaller with `--quick`),
//! and the usage text.

use crate::claim::Claim;
use std::time::Duration;

const USAGE: &str = "usage: scripts/bench.sh [--quick] [--rows N] [--reps N] [--workers 1,4,16] \
[--idle-secs S] [--backlog N] [--claims N] [--only throughput,idle,backlog,http,brokers,latency] \
[--indexes article,status_id,forced] [--durable]
  --quick      smoke test: 2,000 rows, 1 repetition, 10 s idle window, 100,000-row backlog
  --rows       rows per throughput run (default 5000)
  --reps       repetitions of every throughput configuration (default 3)
  --workers    the K values: connections / tableq workers (default 1,4,16)
  --idle-secs  the idle measurement window (default 60; the latency part's binary
               log idle window is three times as long, at least 2 minutes)
  --backlog    waiting rows of the large backlog (default 1000000)
  --claims     timed claims per backlog configuration (default 300)
  --only       which parts to run (default all)
  --durable    a private server that flushes every commit (MariaDB's default)
               instead of once a second
  --indexes    which claim indexes the throughput part runs (default all; the
               article's alone is quadratic in --rows)
env: TABLEQ_BENCH_DATABASE_URL (use this server, not a private one), TABLEQ_BIN";

/// The flags that take a value (`--flag value` or `--flag=value`).
const FLAGS: [&str; 8] = [
    "--rows",
    "--reps",
    "--idle-secs",
    "--backlog",
    "--claims",
    "--workers",
    "--only",
    "--indexes",
];

/// The parts of the benchmark, in the order they run.
const PARTS: [&str; 6] = [
    "throughput",
    "idle",
    "backlog",
    "http",
    "brokers",
    "latency",
];

pub struct Options {
    pub rows: u64,
    pub reps: usize,
    pub workers: Vec<usize>,
    pub idle_window: Duration,
    pub backlog: u64,
    pub claims: usize,
    parts: Vec<String>,
    /// The claim indexes of the throughput part.
    pub claim_indexes: Vec<Claim>,
    /// A private server that flushes every commit.
    pub durable: bool,
}

impl Options {
    /// The options in `args` (as cargo passes them, `--bench` among them); or, as
    /// the error, what to print: the usage for `--help`, or what is wrong.
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut options = Options::defaults(args.iter().any(|a| a == "--quick"));
        options.durable = args.iter().any(|a| a == "--durable");
        let mut args = args
            .iter()
            .filter(|a| *a != "--bench" && *a != "--quick" && *a != "--durable");
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((flag, value)) => (flag, Some(value.to_string())),
                None => (arg.as_str(), None),
            };
            if flag == "--help" || flag == "-h" {
                return Err(USAGE.into());
            }
            if !FLAGS.contains(&flag) {
                return Err(format!("unknown flag {flag}\n{USAGE}"));
            }
            let value = inline
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
            options.set(flag, &value)?;
        }
        Ok(options)
    }

    /// Whether the run includes `part`.
    pub fn runs(&self, part: &str) -> bool {
        self.parts.iter().any(|p| p == part)
    }

    fn defaults(quick: bool) -> Options {
        Options {
            rows: if quick { 2_000 } else { 5_000 },
            reps: if quick { 1 } else { 3 },
            workers: vec![1, 4, 16],
            idle_window: Duration::from_secs(if quick { 10 } else { 60 }),
            backlog: if quick { 100_000 } else { 1_000_000 },
            claims: if quick { 100 } else { 300 },
            parts: PARTS.map(str::to_string).to_vec(),
            claim_indexes: Claim::ALL.to_vec(),
            durable: false,
        }
    }

    /// Sets the option of `flag`, one of [`FLAGS`], to `value`.
    fn set(&mut self, flag: &str, value: &str) -> Result<(), String> {
        let number = |v: &str| {
            v.replace('_', "")
                .parse::<u64>()
                .map_err(|_| format!("{flag}: not a number: {v}"))
        };
        match flag {
            "--rows" => self.rows = number(value)?.max(1),
            "--reps" => self.reps = number(value)?.max(1) as usize,
            "--idle-secs" => self.idle_window = Duration::from_secs(number(value)?.max(1)),
            "--backlog" => self.backlog = number(value)?.max(1_000),
            "--claims" => self.claims = number(value)?.max(1) as usize,
            "--workers" => {
                self.workers = value
                    .split(',')
                    .map(|v| number(v).map(|n| n.max(1) as usize))
                    .collect::<Result<_, _>>()?
            }
            "--only" => {
                self.parts = value.split(',').map(str::to_string).collect();
                if let Some(part) = self.parts.iter().find(|p| !PARTS.contains(&p.as_str())) {
                    return Err(format!("--only: no part named {part}\n{USAGE}"));
                }
            }
            "--indexes" => {
                self.claim_indexes = value
                    .split(',')
                    .map(|name| {
                        Claim::named(name)
                            .ok_or_else(|| format!("--indexes: no index named {name}\n{USAGE}"))
                    })
                    .collect::<Result<_, _>>()?
            }
            _ => unreachable!("checked against FLAGS"),
        }
        Ok(())
    }
}
