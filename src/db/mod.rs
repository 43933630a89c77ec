//! The database seam: the only place outside `check` that talks to the driver.

pub mod connect;
pub mod item;
pub mod prepared;
pub mod row_json;
pub mod session;
