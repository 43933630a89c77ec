//! The repository agrees with the code: the architecture's layers, the shipped
//! examples, schema, deployment files, dashboards, man pages and version.

mod deploy;
mod examples;
mod kubernetes;
mod layers;
mod man_pages;
mod monitoring;
mod schema;
mod version;
