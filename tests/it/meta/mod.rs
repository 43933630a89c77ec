//! The repository agrees with the code: the architecture's layers, the shipped
//! examples, schema, deployment files, dashboards, man pages, version, and the book
//! (its links, its generated reference, its runbooks and the README's quickstart;
//! every GRANT it shows runs), the private servers' ports, the README's test
//! command, which CI runs, and the tests themselves (no function over 80 lines).

mod book;
mod ci;
mod deploy;
mod examples;
mod grants;
mod handwritten;
mod kubernetes;
mod layers;
mod man_pages;
mod monitoring;
mod ports;
mod reference;
mod schema;
mod test_length;
mod version;
