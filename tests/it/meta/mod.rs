//! The repository agrees with the code: the architecture's layers, the shipped
//! examples, schema, deployment files, dashboards, man pages, version, and the book
//! (its links, its generated reference, its runbooks and the README's quickstart;
//! every GRANT it shows runs), and the private servers' ports.

mod book;
mod deploy;
mod examples;
mod grants;
mod kubernetes;
mod layers;
mod man_pages;
mod monitoring;
mod ports;
mod reference;
mod schema;
mod version;
