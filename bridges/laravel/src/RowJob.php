<?php

namespace Tableq\Laravel;

use Illuminate\Container\Container;
use Illuminate\Contracts\Queue\Job as JobContract;
use Illuminate\Queue\Jobs\Job;
use Illuminate\Queue\ManuallyFailedException;
use Throwable;

/**
 * A job of the database queue, backed by the row tableq handed over (the row as
 * tableq selected it, before its claim marked it), in place of Laravel's
 * DatabaseJob. It changes nothing in the database: what the job decides — done,
 * released with a delay, failed for good — is the answer, and tableq changes the
 * row (deletes it, releases it, or writes its failed_jobs row and deletes it).
 */
class RowJob extends Job implements JobContract
{
    /** @var array the row: id, queue, payload, attempts, reserved_at, available_at, created_at */
    protected $row;

    /** @var int|null the delay of the job's release, in seconds */
    protected $releaseDelay;

    /** @var Throwable|null why the job failed for good */
    protected $failure;

    public function __construct(Container $container, array $row, string $connectionName, string $queue)
    {
        $this->container = $container;
        $this->row = $row;
        $this->connectionName = $connectionName;
        $this->queue = $queue;
    }

    public function getJobId()
    {
        return $this->row['id'] ?? null;
    }

    public function getRawBody()
    {
        return $this->row['payload'];
    }

    /**
     * The attempts so far, this one included: tableq's claim counted it in the row
     * (`attempts = attempts + 1`), as Laravel's own claim does, but handed over the
     * row as it was before.
     */
    public function attempts()
    {
        return (int) ($this->row['attempts'] ?? 0) + 1;
    }

    /**
     * Releases the job back onto the queue, available again after `$delay`: noted
     * for the answer (tableq's [on_release] makes it so).
     */
    public function release($delay = 0)
    {
        parent::release($delay);

        $this->releaseDelay = max(0, (int) $this->secondsUntil($delay));
    }

    /**
     * Fails the job for good: its failed() method and the JobFailed event run as
     * under queue:work; the failed_jobs row is tableq's ([on_failure]).
     */
    public function fail($e = null)
    {
        if (! $this->isDeleted() && $this->failure === null) {
            $this->failure = $e ?: new ManuallyFailedException;
        }

        parent::fail($e);
    }

    /** Why the job failed for good, if it did. */
    public function failure(): ?Throwable
    {
        return $this->failure;
    }

    /** The delay of its release in seconds, if it was released. */
    public function releaseDelay(): ?int
    {
        return $this->isReleased() ? (int) $this->releaseDelay : null;
    }

    /** The row tableq handed over. */
    public function getRow(): array
    {
        return $this->row;
    }
}
