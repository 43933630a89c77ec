<?php

namespace App\Providers;

use App\Jobs\CountJob;
use Illuminate\Queue\Events\JobFailed;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\Events\JobProcessing;
use Illuminate\Support\Facades\DB;
use Illuminate\Support\Facades\Queue;
use Illuminate\Support\ServiceProvider;

class AppServiceProvider extends ServiceProvider
{
    public function boot()
    {
        // The queue's events, as a test reads them (CountJob's are too many to keep).
        Queue::before(function (JobProcessing $event) {
            $this->record('processing', $event->job);
        });
        Queue::after(function (JobProcessed $event) {
            $this->record('processed', $event->job);
        });
        Queue::failing(function (JobFailed $event) {
            $this->record('failed', $event->job);
        });
    }

    private function record(string $event, $job): void
    {
        if ($job->resolveName() === CountJob::class) {
            return;
        }
        DB::insert(
            'INSERT INTO job_events (job_id, job_name, event, attempts) VALUES (?, ?, ?, ?)',
            [$job->getJobId(), $job->resolveName(), $event, $job->attempts()]
        );
    }
}
