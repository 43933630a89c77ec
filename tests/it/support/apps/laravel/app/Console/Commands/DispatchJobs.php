<?php

namespace App\Console\Commands;

use Illuminate\Console\Command;
use Illuminate\Support\Facades\DB;

class DispatchJobs extends Command
{
    protected $signature = 'app:dispatch {job : The class in App\Jobs} {count=1} {args?* : More arguments of its constructor}
                            {--key= : The keys\' prefix (default: the class name)}';

    protected $description = 'Dispatch jobs with Laravel\'s own dispatch(), each with the key "{prefix}-{n}"';

    public function handle()
    {
        $class = 'App\\Jobs\\'.$this->argument('job');
        $args = array_map(function ($arg) {
            return is_numeric($arg) ? (int) $arg : $arg;
        }, $this->argument('args'));
        $count = (int) $this->argument('count');
        $prefix = $this->option('key') ?: $this->argument('job');
        DB::transaction(function () use ($class, $args, $count, $prefix) {
            for ($n = 1; $n <= $count; $n++) {
                dispatch(new $class("{$prefix}-{$n}", ...$args));
            }
        });
        $this->info("dispatched {$count} {$class}");

        return 0;
    }
}
