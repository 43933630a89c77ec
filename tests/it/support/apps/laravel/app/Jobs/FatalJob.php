<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

class FatalJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels, RecordsRuns;

    /** @var string "undefined" (a call to an undefined function) or "memory" (memory_limit) */
    public $how;

    /** @var string PHP's display_errors while it runs: "on" or "off" */
    public $display;

    /**
     * Create a new job instance.
     *
     * @return void
     */
    public function __construct(string $key, string $how = 'undefined', string $display = 'off', int $tries = 0)
    {
        $this->key = $key;
        $this->how = $how;
        $this->display = $display;
        if ($tries > 0) {
            $this->tries = $tries;
        }
    }

    /**
     * Execute the job.
     *
     * @return void
     */
    public function handle()
    {
        $this->executed();
        ini_set('display_errors', $this->display);
        if ($this->how === 'memory') {
            ini_set('memory_limit', '32M');
            $hog = str_repeat('x', 64 * 1024 * 1024);
        } else {
            tableq_no_such_function();
        }
        $this->completed();
    }
}
