//! Each action kind against the real thing it talks to: a child process (command), an
//! HTTP server on loopback (http), the RabbitMQ and NATS this machine runs (amqp,
//! nats).

mod amqp;
mod command;
mod command_env;
mod command_reaper;
mod http;
mod http_trace_context;
mod nats;
