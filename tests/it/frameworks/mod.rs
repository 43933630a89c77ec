//! Frameworks' own queue tables run in place by tableq, through a bridge that runs
//! each row with the framework's own job machinery, in a minimal application of each
//! framework built once per test run: Laravel's `jobs` table (`bridges/laravel`,
//! `php artisan tableq:work`, `support::laravel`) and Symfony Messenger's
//! `messenger_messages` (`bridges/symfony`, `bin/console tableq:consume`,
//! `support::symfony`).

mod laravel;
mod symfony;
