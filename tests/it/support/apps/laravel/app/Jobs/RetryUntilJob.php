<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;
use RuntimeException;

class RetryUntilJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, RecordsRuns;

    /**
     * The number of seconds to wait before retrying the job.
     *
     * @var int
     */
    public $backoff = 1;

    /** @var int for how many seconds from its dispatch it is retried */
    public $seconds;

    /**
     * Create a new job instance.
     *
     * @return void
     */
    public function __construct(string $key, int $seconds = 3)
    {
        $this->key = $key;
        $this->seconds = $seconds;
    }

    /**
     * Determine the time at which the job should timeout.
     *
     * @return \DateTime
     */
    public function retryUntil()
    {
        return now()->addSeconds($this->seconds);
    }

    /**
     * Execute the job.
     *
     * @return void
     */
    public function handle()
    {
        $this->executed();
        throw new RuntimeException("{$this->key} fails on attempt {$this->attempts()}");
    }
}
