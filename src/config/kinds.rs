//! The kinds' `[action]` tables, as written and validated: the config layer's part of
//! each kind. Each file lives in its kind's folder, `src/action/<kind>/config.rs`, beside
//! the kind's runtime, and is a module here, so that this layer names no module of the
//! action layer above it (the runtime reaches its table as `super::config`). `message`
//! holds the brokers' shared message keys, `process` the keys of a program tableq starts.

#[path = "../action/amqp/config.rs"]
pub mod amqp;
#[path = "../action/command/config.rs"]
pub mod command;
#[path = "../action/fastcgi/config.rs"]
pub mod fastcgi;
#[path = "../action/http/config.rs"]
pub mod http;
#[path = "../action/message/config.rs"]
pub mod message;
#[path = "../action/nats/config.rs"]
pub mod nats;
#[path = "../action/process/config.rs"]
pub mod process;
#[path = "../action/sql/config.rs"]
pub mod sql;
#[path = "../action/worker/config.rs"]
pub mod worker;
