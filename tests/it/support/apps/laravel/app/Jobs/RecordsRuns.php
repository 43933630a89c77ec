<?php

namespace App\Jobs;

use Illuminate\Support\Facades\DB;
use Throwable;

/**
 * What a test job did, in its row of job_runs (by its key): how often it started
 * (executions), finished (completions), and had its failed() method called.
 */
trait RecordsRuns
{
    /** @var string */
    public $key;

    protected function executed(): void
    {
        DB::insert(
            'INSERT INTO job_runs (job_key, executions, last_attempt) VALUES (?, 1, ?)
             ON DUPLICATE KEY UPDATE executions = executions + 1, last_attempt = VALUES(last_attempt)',
            [$this->key, $this->attempts()]
        );
    }

    protected function completed(): void
    {
        DB::update('UPDATE job_runs SET completions = completions + 1 WHERE job_key = ?', [$this->key]);
    }

    protected function executions(): int
    {
        return (int) DB::table('job_runs')->where('job_key', $this->key)->value('executions');
    }

    public function failed(Throwable $exception)
    {
        DB::insert(
            'INSERT INTO job_runs (job_key, failed_calls, last_error) VALUES (?, 1, ?)
             ON DUPLICATE KEY UPDATE failed_calls = failed_calls + 1, last_error = VALUES(last_error)',
            [$this->key, get_class($exception).': '.$exception->getMessage()]
        );
    }
}
