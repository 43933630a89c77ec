//! Queue files and settings as the user writes them: a mistake is refused with its
//! file, line and key; files that are not files; secrets from files; the database URL;
//! random text never panics the loader.

mod bad_input;
mod database_url;
mod loader_fuzz;
mod queue_file_types;
mod secret_files;
