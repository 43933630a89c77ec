//! Each action kind against the real thing it talks to: a child process (command), an
//! HTTP server on loopback (http), the RabbitMQ and NATS this machine runs (amqp,
//! nats). A kind's own module holds what only that kind does; `brokers` is the
//! suite every message broker passes, with an adapter per broker.

mod amqp;
mod brokers;
mod command;
mod command_env;
mod command_reaper;
mod fastcgi;
mod fastcgi_php;
mod http;
mod http_trace_context;
mod nats;
mod worker;
