//! PHP frameworks' own queue tables run in place by tableq, with each framework's
//! bridge (`bridges/`) as the worker, on a real app of the framework built once per
//! test process (`support::laravel`, `support::symfony`).

mod laravel;
mod symfony;
