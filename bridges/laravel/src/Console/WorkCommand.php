<?php

namespace Tableq\Laravel\Console;

use Illuminate\Console\Command;
use Illuminate\Console\OutputStyle;
use Illuminate\Queue\WorkerOptions;
use Symfony\Component\Console\Output\StreamOutput;
use Tableq\Laravel\Answers;
use Tableq\Laravel\JobRunner;

/**
 * `php artisan tableq:work [connection]`: the process tableq's `type = "worker"`
 * action keeps warm. tableq claims the jobs table's rows (as queue:work would, so
 * both can run side by side) and hands each over on stdin; this runs it through the
 * application's own queue worker and answers on stdout.
 */
class WorkCommand extends Command
{
    protected $signature = 'tableq:work
                            {connection? : The name of the queue connection the jobs are of}
                            {--name=default : The name of the worker}
                            {--queue= : The queue of the jobs (default: the connection\'s)}
                            {--backoff=0 : The number of seconds to wait before retrying a job that encountered an uncaught exception}
                            {--max-jobs=0 : The number of jobs to process before stopping}
                            {--max-time=0 : The maximum number of seconds the worker should run}
                            {--memory=128 : The memory limit in megabytes}
                            {--timeout=60 : The number of seconds a job can run}
                            {--tries=1 : Number of times to attempt a job before logging it failed}';

    protected $description = 'Run the jobs tableq hands over on stdin (tableq\'s worker protocol), as queue:work would';

    public function handle(): int
    {
        // First: nothing but answers may reach stdout from here on.
        $answers = Answers::takeStdout();
        $this->output = new OutputStyle($this->input, new StreamOutput(STDERR));

        $connection = $this->argument('connection') ?: $this->laravel['config']['queue.default'];
        $queue = $this->option('queue')
            ?: $this->laravel['config']->get("queue.connections.{$connection}.queue", 'default');

        $worker = $this->laravel['queue.worker'];
        $worker->setName($this->option('name'))->setCache($this->laravel['cache.store']);

        return (new JobRunner($this->laravel, $worker, $answers, $this->gatherWorkerOptions(), $connection, $queue))
            ->run(STDIN);
    }

    /** queue:work's options, where they mean something here. */
    protected function gatherWorkerOptions(): WorkerOptions
    {
        return new WorkerOptions(
            $this->option('name'),
            $this->option('backoff'),
            $this->option('memory'),
            $this->option('timeout'),
            0,
            $this->option('tries'),
            false,
            false,
            $this->option('max-jobs'),
            $this->option('max-time')
        );
    }
}
