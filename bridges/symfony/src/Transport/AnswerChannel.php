<?php

namespace Tableq\Symfony\Transport;

/**
 * The process's stdout, kept for tableq's answers only.
 *
 * tableq reads one JSON answer per item on the worker's stdout and ends the
 * process on anything else, so everything the application prints (echo,
 * var_dump, a logger or a library writing to STDOUT) must go elsewhere. Where
 * PHP's FFI extension can be used (the CLI's default, ffi.enable=preload), file
 * descriptor 1 is duplicated for the answers and then pointed at stderr, so even
 * writes straight to fd 1 reach stderr (tableq logs it). Without FFI, PHP's
 * output buffer sends echo and friends to stderr and the answers use STDOUT.
 */
final class AnswerChannel
{
    /** @var resource */
    private $answers;

    private function __construct($answers)
    {
        $this->answers = $answers;
    }

    /**
     * Takes stdout for the answers; from now on, the rest goes to stderr.
     */
    public static function takeStdout(): self
    {
        ini_set('display_errors', 'stderr');
        $answers = self::duplicateStdout() ?? \STDOUT;
        ob_start(static function (string $buffer): string {
            if ('' !== $buffer) {
                fwrite(\STDERR, $buffer);
            }

            return '';
        }, 1);

        return new self($answers);
    }

    /**
     * A channel writing to $stream (a test's memory stream).
     *
     * @param resource $stream
     */
    public static function on($stream): self
    {
        return new self($stream);
    }

    /**
     * Writes one answer line, e.g. ['ok' => true].
     */
    public function answer(array $answer): void
    {
        $line = json_encode($answer, \JSON_UNESCAPED_SLASHES | \JSON_UNESCAPED_UNICODE | \JSON_INVALID_UTF8_SUBSTITUTE)."\n";
        for ($written = 0; $written < \strlen($line); $written += $chunk) {
            $chunk = fwrite($this->answers, substr($line, $written));
            if (false === $chunk || 0 === $chunk) {
                throw new \RuntimeException('tableq closed the answer pipe (stdout)');
            }
        }
        fflush($this->answers);
    }

    /**
     * @return resource|null a stream on a copy of fd 1, with fd 1 now stderr
     */
    private static function duplicateStdout()
    {
        if (!\extension_loaded('ffi')) {
            return null;
        }
        try {
            $libc = \FFI::cdef('int dup(int oldfd); int dup2(int oldfd, int newfd);');
            $copy = $libc->dup(1);
            if ($copy < 0) {
                return null;
            }
            $stream = fopen('php://fd/'.$copy, 'w');
            if (false === $stream || $libc->dup2(2, 1) < 0) {
                return null;
            }

            return $stream;
        } catch (\Throwable $e) {
            return null; // FFI disabled (ffi.enable=false): the output buffer alone
        }
    }
}
