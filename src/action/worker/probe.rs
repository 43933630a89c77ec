//! What `check` finds of a worker: its command starts, and ends (status 0, having
//! written nothing) when its input ends before any item — how tableq stops it.
//! No row is sent.

use futures::future::BoxFuture;

use super::process::{Running, WithoutInput};
use super::{Worker, GRACE};
use crate::action::{Probe, Probed};
use crate::db::Item;

impl Probe for Worker {
    fn probe<'a>(&'a self, queue: &'a str, _: Option<&'a Item>) -> BoxFuture<'a, Vec<Probed>> {
        Box::pin(look(self, queue))
    }
}

async fn look(worker: &Worker, queue: &str) -> Vec<Probed> {
    let program = &worker.program;
    let mut process = match Running::start(&worker.config, queue, 0) {
        Ok(process) => process,
        Err(e) => return vec![Probed::error("command", format!("cannot run {program}: {e}"))],
    };
    let found = match process.without_input(GRACE).await {
        WithoutInput::Ended => Probed::note(
            "command",
            format!("{program} starts, and ends when its input does"),
        ),
        WithoutInput::Failed(how) => Probed::error(
            "command",
            format!("{program} cannot run: started with no item, it exited ({how})"),
        ),
        WithoutInput::Wrote(line) => Probed::error(
            "command",
            format!(
                "{program} wrote on stdout before any item: {line}; stdout is for answers \
                 only (send logs and PHP's warnings to stderr: display_errors=stderr)"
            ),
        ),
        WithoutInput::KeptRunning => Probed::warning(
            "command",
            format!(
                "{program} kept running {} after its input ended: a worker should end when \
                 its stdin does (tableq closes it to stop the worker, and kills it after that \
                 long)",
                humantime::format_duration(GRACE)
            ),
        ),
    };
    vec![found]
}
