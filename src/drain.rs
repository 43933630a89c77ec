//! `--stop-when-empty`: knowing when a queue is drained — nothing waiting and nothing
//! in flight — even with many workers, some of whose items may come back.

use std::sync::Mutex;

use tokio_util::sync::CancellationToken;

/// Shared by a queue's workers. A queue is drained when a claim found nothing, no
/// other worker was busy, and no item returned to the queue since that claim began.
#[derive(Debug)]
pub struct Drain {
    enabled: bool,
    state: Mutex<State>,
    drained: CancellationToken,
}

#[derive(Debug, Default)]
struct State {
    busy: usize,
    /// Bumped whenever an item returns to the queue or a transaction is lost.
    returns: u64,
}

/// Taken before a claim; says what the queue looked like when it began.
#[derive(Debug)]
pub struct Ticket {
    returns_at_start: u64,
}

impl Drain {
    /// `drained` is cancelled when the queue is drained (only if `enabled`).
    pub fn new(enabled: bool, drained: CancellationToken) -> Self {
        Drain {
            enabled,
            state: Mutex::new(State::default()),
            drained,
        }
    }

    pub fn begin(&self) -> Ticket {
        let mut state = self.lock();
        state.busy += 1;
        Ticket {
            returns_at_start: state.returns,
        }
    }

    /// The claim found rows (or failed); `returned` says whether any went back.
    pub fn finish(&self, _ticket: Ticket, returned: bool) {
        let mut state = self.lock();
        state.busy -= 1;
        if returned {
            state.returns += 1;
        }
    }

    /// The claim found nothing. Returns true if the queue is now drained.
    pub fn finish_empty(&self, ticket: Ticket) -> bool {
        let mut state = self.lock();
        state.busy -= 1;
        let drained = self.enabled && state.busy == 0 && state.returns == ticket.returns_at_start;
        if drained {
            self.drained.cancel();
        }
        drained
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // The state stays consistent even if a holder panicked: plain counters.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drained_only_when_nobody_is_busy_and_nothing_came_back() {
        let token = CancellationToken::new();
        let drain = Drain::new(true, token.clone());
        let a = drain.begin();
        let b = drain.begin();
        assert!(!drain.finish_empty(a), "b is still busy");
        let a = drain.begin();
        drain.finish(b, true); // b's item came back
        assert!(
            !drain.finish_empty(a),
            "an item returned after a's claim began"
        );
        let a = drain.begin();
        assert!(drain.finish_empty(a));
        assert!(token.is_cancelled());
    }

    #[test]
    fn never_drains_when_disabled() {
        let token = CancellationToken::new();
        let drain = Drain::new(false, token.clone());
        let t = drain.begin();
        assert!(!drain.finish_empty(t));
        assert!(!token.is_cancelled());
    }
}
