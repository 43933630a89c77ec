//! What `tableq check` is asked to do.

/// How `check` runs.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Skip everything that needs the database.
    pub offline: bool,
    /// For queues without their own `database_url`.
    pub database_url: Option<String>,
    /// Galera and multi-primary group replication are not errors.
    pub allow_multi_primary: bool,
}
