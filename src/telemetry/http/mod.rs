//! The HTTP endpoint of `--metrics-addr`: the hardened listener ([`listener`]) and
//! the status page ([`status`]).

pub mod listener;
pub mod status;
