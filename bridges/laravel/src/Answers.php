<?php

namespace Tableq\Laravel;

/**
 * The process's stdout, kept for tableq's answers alone: one JSON object per line.
 *
 * tableq ends a worker that writes anything else there, so whatever else PHP, the
 * framework or a job writes on stdout (echo, dump(), a console line, PHP's displayed
 * errors) is sent to stderr, which tableq logs: the answers get a copy of file
 * descriptor 1, and descriptor 1 itself becomes a copy of stderr (dup2, through
 * PHP's FFI, which the CLI allows by default). Without FFI, PHP's own output
 * (echo, print, displayed errors) is still caught and sent to stderr; only a
 * direct write to the STDOUT stream would reach tableq (and end the process).
 */
final class Answers
{
    /** The longest error an answer carries, in bytes. */
    private const ERROR_LIMIT = 256 * 1024;

    /** @var resource the pipe to tableq */
    private $stream;

    /** @param resource $stream */
    private function __construct($stream)
    {
        $this->stream = $stream;
    }

    /**
     * Takes stdout for the answers. Call it before anything else is written there.
     */
    public static function takeStdout(): self
    {
        // php://fd/N opens a duplicate of descriptor N.
        $answers = fopen('php://fd/1', 'wb');
        if ($answers === false) {
            throw new \RuntimeException('tableq:work cannot open its stdout');
        }
        if (! self::stdoutToStderr()) {
            ob_start(static function (string $buffer): string {
                fwrite(STDERR, $buffer);

                return '';
            }, 1);
            fwrite(STDERR, "tableq:work: PHP's FFI is not available (ffi.enable), so only PHP's own output is kept off stdout: a direct write to STDOUT would reach tableq\n");
        }

        return new self($answers);
    }

    /** Makes descriptor 1 a copy of descriptor 2; false if it cannot. */
    private static function stdoutToStderr(): bool
    {
        if (! extension_loaded('FFI')) {
            return false;
        }
        try {
            return \FFI::cdef('int dup2(int oldfd, int newfd);')->dup2(2, 1) === 1;
        } catch (\Throwable $e) {
            return false; // ffi.enable=0, or no C library to bind
        }
    }

    /**
     * Writes one answer, as one line, and flushes it.
     */
    public function write(array $answer): void
    {
        if (isset($answer['error']) && strlen($answer['error']) > self::ERROR_LIMIT) {
            // tableq reads lines of up to 1 MiB: a deep trace must not break the protocol.
            $answer['error'] = substr($answer['error'], 0, self::ERROR_LIMIT).'…';
        }
        $line = json_encode(
            $answer,
            JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE | JSON_PARTIAL_OUTPUT_ON_ERROR
        ) . "\n";
        while ($line !== '') {
            $written = @fwrite($this->stream, $line);
            if ($written === false || $written === 0) {
                return; // tableq is gone: nothing to answer to
            }
            $line = (string) substr($line, $written);
        }
        fflush($this->stream);
    }

    /**
     * Closes the answers' pipe: tableq sees the process end at once, before it
     * could hand it another item.
     */
    public function close(): void
    {
        if (is_resource($this->stream)) {
            fclose($this->stream);
        }
    }
}
