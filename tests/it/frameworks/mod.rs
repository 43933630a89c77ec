//! Frameworks' own queue tables run in place by tableq, through a bridge that runs
//! each row with the framework's own job machinery: Laravel's `jobs` table
//! (`bridges/laravel`, `php artisan tableq:work`), in a minimal application of the
//! framework built once per test run (`support::laravel`).

mod laravel;
