<?php

namespace Tableq\Laravel;

use Illuminate\Contracts\Events\Dispatcher;
use Illuminate\Contracts\Foundation\Application;
use Illuminate\Queue\Events\JobExceptionOccurred;
use Illuminate\Queue\Events\Looping;
use Illuminate\Queue\Events\WorkerStopping;
use Illuminate\Queue\Worker;
use Illuminate\Queue\WorkerOptions;
use Throwable;

/**
 * The loop of `tableq:work`: one row per line on stdin, each run as a job through
 * the application's own queue worker (`Illuminate\Queue\Worker`, as `queue:work`
 * runs it: its events, tries, backoff, retryUntil, timeout, failed()), one answer
 * per line on stdout. It ends when stdin does, or when `queue:work` would stop
 * after a job (memory, `queue:restart`, SIGTERM, --max-jobs, --max-time).
 */
final class JobRunner
{
    /** The errors that end a PHP script. */
    private const FATAL = [E_ERROR, E_PARSE, E_CORE_ERROR, E_COMPILE_ERROR, E_RECOVERABLE_ERROR];

    /** @var Application */
    private $app;

    /** @var Worker */
    private $worker;

    /** @var Answers */
    private $answers;

    /** @var WorkerOptions */
    private $options;

    /** @var string */
    private $connection;

    /** @var string */
    private $queue;

    /** @var RowJob|null the job being run */
    private $current;

    /** @var Throwable|null what the job being run threw */
    private $exception;

    public function __construct(Application $app, Worker $worker, Answers $answers, WorkerOptions $options, string $connection, string $queue)
    {
        $this->app = $app;
        $this->worker = $worker;
        $this->answers = $answers;
        $this->options = $options;
        $this->connection = $connection;
        $this->queue = $queue;
    }

    /**
     * Runs the rows of `$input` until it ends; the exit status.
     *
     * @param resource $input
     */
    public function run($input): int
    {
        $this->listen();
        register_shutdown_function(function () {
            $this->diedWith(error_get_last());
        });
        $lastRestart = $this->onWorker('getTimestampOfLastQueueRestart');
        [$startTime, $jobsProcessed] = [hrtime(true) / 1e9, 0];

        while (($line = fgets($input)) !== false) {
            if (trim($line) === '') {
                continue;
            }
            $answer = $this->handle($line);
            $jobsProcessed++;
            // Decided before the answer, so that the answer and the end come together.
            $status = $this->onWorker('stopIfNecessary', $this->options, $lastRestart, $startTime, $jobsProcessed, true);
            if ($status !== null) {
                // tableq hands this process no other row: none is lost to its end.
                $answer['last'] = true;
            }
            $this->answers->write($answer);
            if ($status !== null) {
                $this->answers->close();

                return $this->worker->stop($status);
            }
        }

        return $this->worker->stop(Worker::EXIT_SUCCESS);
    }

    /** Runs the job of one line; its answer. */
    private function handle(string $line): array
    {
        try {
            $row = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
        } catch (\JsonException $e) {
            return ['ok' => false, 'error' => 'tableq:work was handed a line that is not JSON: '.$e->getMessage()];
        }
        if (! is_array($row) || ! is_string($row['payload'] ?? null)) {
            return ['ok' => false, 'error' => 'tableq:work was handed a row without a `payload` (select the jobs table\'s columns)'];
        }
        $job = new RowJob($this->app, $row, $this->connection, (string) ($row['queue'] ?? $this->queue));
        [$this->current, $this->exception] = [$job, null];
        // As queue:work's loop before each job (listeners roll back a transaction
        // left open, …); a listener's `false` cannot pause a job already claimed.
        $this->app->make(Dispatcher::class)->dispatch(new Looping($this->connection, $this->queue));
        (function () {
            if (isset($this->resetScope)) {
                ($this->resetScope)();
            }
        })->call($this->worker);

        $alarm = extension_loaded('pcntl');
        if ($alarm) {
            $this->onWorker('registerTimeoutHandler', $job, $this->options);
        }
        // As queue:work: process() the job, report what it threw.
        $this->onWorker('runJob', $job, $this->connection, $this->options);
        if ($alarm) {
            $this->onWorker('resetTimeoutHandler');
        }
        $this->current = null;

        return $this->answerFor($job);
    }

    /** What the job decided, in tableq's words. */
    private function answerFor(RowJob $job): array
    {
        if ($failure = $job->failure()) {
            return self::failed($failure);
        }
        if ($job->isReleased()) {
            $answer = ['ok' => false, 'release_after' => $job->releaseDelay(), 'error' => 'the job released itself'];
            if ($e = $this->exception) {
                $answer['error'] = get_class($e).': '.$e->getMessage();
                $answer['kind'] = get_class($e);
            }

            return $answer;
        }

        return ['ok' => true];
    }

    /**
     * The answer for a job failed for good: the exception as Laravel's failer
     * stores it, and its class, by which tableq groups failures.
     */
    private static function failed(Throwable $e): array
    {
        return ['ok' => false, 'error' => (string) $e, 'kind' => get_class($e)];
    }

    /** Listens for what the worker says of the job being run. */
    private function listen(): void
    {
        $events = $this->app->make(Dispatcher::class);
        $events->listen(JobExceptionOccurred::class, function (JobExceptionOccurred $event) {
            if ($event->job === $this->current) {
                $this->exception = $event->exception;
            }
        });
        // The worker's timeout handler (pcntl_alarm) fails the job if it will exceed
        // its tries, then kills the process: answer before it does.
        $events->listen(WorkerStopping::class, function () {
            $job = $this->current;
            if ($job === null) {
                return;
            }
            if ($job->failure()) {
                $this->answers->write(self::failed($job->failure()) + ['last' => true]);
            }
            // The process ends now: tableq must not hand it another row meanwhile.
            $this->answers->close();
            $seconds = $this->onWorker('timeoutForJob', $job, $this->options);
            fwrite(STDERR, sprintf(
                "tableq:work: %s (job %s) ran past its timeout of %d s: the process is killed, as queue:work's is%s\n",
                $job->resolveName(), $job->getJobId(), $seconds,
                $job->failure() ? '; the job failed for good' : '; the job will be tried again'
            ));
        });
        if (extension_loaded('pcntl')) {
            pcntl_async_signals(true);
            // As queue:work: SIGTERM ends the process after the job in hand.
            pcntl_signal(SIGTERM, function () {
                $this->worker->shouldQuit = true;
                if ($this->current === null) {
                    exit(Worker::EXIT_SUCCESS);
                }
            });
        }
    }

    /**
     * PHP died while it ran a job (a fatal error: memory_limit, a compile error…).
     * As the worker's timeout handler does: the job fails for good if it will
     * exceed its tries (its failed() runs, and the answer carries PHP's message);
     * else the process just ends, and tableq puts the row back.
     */
    private function diedWith(?array $error): void
    {
        $job = $this->current;
        if ($job === null || $error === null || ! in_array($error['type'], self::FATAL, true)) {
            return;
        }
        @ini_set('memory_limit', '-1');
        $message = sprintf('PHP Fatal error:  %s in %s on line %d', $error['message'], $error['file'], $error['line']);
        if (! ini_get('log_errors') || ini_get('error_log')) {
            // PHP did not say it on stderr: tableq reads PHP's death there.
            fwrite(STDERR, $message."\n");
        }
        $e = class_exists(\Symfony\Component\ErrorHandler\Error\FatalError::class)
            ? new \Symfony\Component\ErrorHandler\Error\FatalError($error['message'], 0, $error, 0)
            : new \ErrorException($error['message'], 0, $error['type'], $error['file'], $error['line']);
        try {
            $this->onWorker('markJobAsFailedIfWillExceedMaxAttempts', $job->getConnectionName(), $job, (int) $this->options->maxTries, $e);
        } catch (Throwable $ignored) {
            // failed() threw: the job is failed all the same.
        }
        if ($job->failure()) {
            $this->answers->write(['ok' => false, 'error' => $message, 'kind' => get_class($e), 'last' => true]);
        }
        $this->answers->close();
    }

    /** Calls the worker's own (protected) `$method`: queue:work's code, not a copy. */
    private function onWorker(string $method, ...$arguments)
    {
        return (function () use ($method, $arguments) {
            return $this->{$method}(...$arguments);
        })->call($this->worker);
    }
}
