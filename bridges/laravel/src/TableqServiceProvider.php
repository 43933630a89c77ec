<?php

namespace Tableq\Laravel;

use Illuminate\Support\ServiceProvider;
use Tableq\Laravel\Console\WorkCommand;

/**
 * Registers `php artisan tableq:work`: the process tableq's `type = "worker"` action
 * starts to run the jobs of Laravel's database queue.
 */
class TableqServiceProvider extends ServiceProvider
{
    public function boot(): void
    {
        if ($this->app->runningInConsole()) {
            $this->commands([WorkCommand::class]);
        }
    }
}
