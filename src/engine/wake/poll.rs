//! Polling as a queue's source of wake-ups: the watcher claims every
//! `poll_interval`, unless another source announces every change.

use std::time::Duration;

use super::source::{Poll, WakeSource};

/// Every `poll_interval`.
#[derive(Debug)]
pub struct Polling(pub Duration);

impl WakeSource for Polling {
    fn poll(&self) -> Poll {
        Poll::Every(self.0)
    }
}
