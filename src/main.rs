//! The `tableq` binary: parse the command line, start logging, run the command, and
//! turn its failure into an exit status (2: usage or queue files, 1: at run time).

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use tableq::commands::cli::Cli;
use tableq::commands::{execute, Failure};

fn main() -> ExitCode {
    let cli = Cli::parse();
    tableq::telemetry::log::init(cli.log_format);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "tableq: cannot start the async runtime: {e}"
            );
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(execute(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::CheckFailed) => Failure::CheckFailed.exit_code(),
        Err(failure) => {
            // Not eprintln!, which panics when stderr is closed too (`2>&1 | head`).
            let _ = writeln!(std::io::stderr(), "{failure}");
            failure.exit_code()
        }
    }
}
