<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use Illuminate\Support\Facades\DB;
use RuntimeException;

class FailingJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, RecordsRuns;

    /**
     * The number of times the job may be attempted.
     *
     * @var int
     */
    public $tries = 3;

    /**
     * The number of seconds to wait before retrying the job.
     *
     * @var array
     */
    public $backoff = [1, 2];

    /** @var int how many of its runs throw */
    public $failures;

    /**
     * Create a new job instance.
     *
     * @return void
     */
    public function __construct(string $key, int $failures = 3)
    {
        $this->key = $key;
        $this->failures = $failures;
    }

    /**
     * The job's middleware: it notes each run it lets through.
     *
     * @return array
     */
    public function middleware()
    {
        return [function ($job, $next) {
            DB::insert(
                "INSERT INTO job_events (job_id, job_name, event, attempts) VALUES (?, ?, 'middleware', ?)",
                [$job->job->getJobId(), static::class, $job->attempts()]
            );

            return $next($job);
        }];
    }

    /**
     * Execute the job.
     *
     * @return void
     */
    public function handle()
    {
        $this->executed();
        if ($this->executions() <= $this->failures) {
            throw new RuntimeException("{$this->key} fails on attempt {$this->attempts()}");
        }
        $this->completed();
    }
}
