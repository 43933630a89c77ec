<?php

namespace Tableq\Symfony\Transport;

use Symfony\Component\Messenger\Bridge\Doctrine\Transport\DoctrineReceivedStamp;
use Symfony\Component\Messenger\Envelope;
use Symfony\Component\Messenger\Exception\HandlerFailedException;
use Symfony\Component\Messenger\Stamp\SentToFailureTransportStamp;
use Symfony\Component\Messenger\Stamp\TransportMessageIdStamp;
use Symfony\Component\Messenger\Transport\Receiver\ReceiverInterface;
use Symfony\Component\Messenger\Transport\Serialization\SerializerInterface;
use Symfony\Component\Messenger\Worker;

/**
 * A receiver fed by tableq: each line on stdin is a row of the Doctrine
 * transport's table (id, body, headers, queue_name, created_at, available_at,
 * delivered_at), already marked delivered by tableq's lease. It becomes an
 * Envelope as DoctrineReceiver makes one (the transport's own serializer, a
 * DoctrineReceivedStamp and a TransportMessageIdStamp); Symfony's Worker then
 * handles it, and ack()/reject() write tableq's answer instead of changing the
 * row: tableq deletes it. On a rejection, Symfony's listeners have already sent
 * the retry (a new row) or the copy to the failure transport.
 *
 * One item at a time: tableq waits for the answer before it writes the next line.
 * At the end of stdin the worker is stopped.
 */
final class ProtocolReceiver implements ReceiverInterface
{
    /** @var resource */
    private $input;
    private $transportName;
    private $serializer;
    private $answers;
    /** @var Worker|null */
    private $worker;
    /** @var string|null the id of the row whose answer is still owed */
    private $pending;
    /** @var string|null why the pending message failed, from the worker's event */
    private $failure;
    /** @var string|null its kind: the handler's exception's class */
    private $failureKind;

    /**
     * @param resource $input
     */
    public function __construct($input, string $transportName, SerializerInterface $serializer, AnswerChannel $answers)
    {
        $this->input = $input;
        $this->transportName = $transportName;
        $this->serializer = $serializer;
        $this->answers = $answers;
    }

    /**
     * The worker to stop at the end of the input.
     */
    public function stopAtEnd(Worker $worker): void
    {
        $this->worker = $worker;
    }

    public function get(): iterable
    {
        if (null !== $this->pending) {
            // A batch handler holds the message (NoAutoAckStamp): nothing more
            // until the worker, idle, flushes it and acks or rejects it.
            return [];
        }
        while (true) {
            $line = fgets($this->input);
            if (false === $line) {
                if (null !== $this->worker) {
                    $this->worker->stop();
                }

                return [];
            }
            if ('' === trim($line)) {
                continue;
            }
            $envelope = $this->decode($line);
            if (null !== $envelope) {
                return [$envelope];
            }
        }
    }

    public function ack(Envelope $envelope): void
    {
        $this->settle(['ok' => true]);
    }

    public function reject(Envelope $envelope): void
    {
        $answer = ['ok' => false, 'error' => $this->failure ?? 'rejected by the worker'];
        if (null !== $this->failureKind) {
            $answer['kind'] = $this->failureKind;
        }
        $this->settle($answer);
    }

    /**
     * Notes why the message in hand failed (a WorkerMessageFailedEvent's throwable),
     * for the answer of reject().
     */
    public function failedWith(\Throwable $throwable): void
    {
        $this->failure = self::describe($throwable);
        $this->failureKind = \get_class(self::cause($throwable));
    }

    /**
     * The handler's own exception inside Messenger's HandlerFailedException: its
     * class is the failure's kind, by which tableq groups failures.
     */
    public static function cause(\Throwable $throwable): \Throwable
    {
        if ($throwable instanceof HandlerFailedException && [] !== $throwable->getNestedExceptions()) {
            return self::cause($throwable->getNestedExceptions()[0]);
        }

        return $throwable;
    }

    /**
     * "Class: message" of the exception that made a message fail: the handler's
     * own, not Messenger's HandlerFailedException around it.
     */
    public static function describe(\Throwable $throwable): string
    {
        if ($throwable instanceof HandlerFailedException && [] !== $throwable->getNestedExceptions()) {
            $nested = $throwable->getNestedExceptions();
            $text = self::describe($nested[0]);

            return \count($nested) > 1 ? sprintf('%s (and %d more)', $text, \count($nested) - 1) : $text;
        }

        return \get_class($throwable).': '.$throwable->getMessage();
    }

    private function settle(array $answer): void
    {
        $this->pending = null;
        $this->failure = null;
        $this->failureKind = null;
        $this->answers->answer($answer);
    }

    /**
     * The row's Envelope; null (having answered the row's failure) when the line or
     * the message cannot be decoded, as DoctrineReceiver rejects such a row.
     */
    private function decode(string $line): ?Envelope
    {
        try {
            $row = json_decode($line, true, 512, \JSON_THROW_ON_ERROR);
            if (!\is_array($row) || !isset($row['id'], $row['body'])) {
                throw new \UnexpectedValueException('a row needs at least id and body');
            }
            $id = (string) $row['id'];
            $headers = \is_string($row['headers'] ?? null) ? json_decode($row['headers'], true) : ($row['headers'] ?? []);
            $envelope = $this->serializer->decode(['body' => $row['body'], 'headers' => $headers ?? []]);
        } catch (\Throwable $e) {
            $this->answers->answer(['ok' => false, 'error' => self::describe($e)]);

            return null;
        }
        $sentToFailure = $envelope->last(SentToFailureTransportStamp::class);
        if (null !== $sentToFailure && $sentToFailure->getOriginalReceiverName() === $this->transportName) {
            // `tableq retry` moved it from the failure transport back to its own:
            // a fresh start. With the stamp, Messenger would drop it if it failed
            // again (it never sends a message to the failure transport twice);
            // without it, it goes back there.
            $envelope = $envelope->withoutAll(SentToFailureTransportStamp::class);
        }
        $this->pending = $id;
        $this->failure = null;
        $stamps = [new TransportMessageIdStamp($id)];
        if (class_exists(DoctrineReceivedStamp::class)) {
            array_unshift($stamps, new DoctrineReceivedStamp($id));
        }

        return $envelope->with(...$stamps);
    }
}
