<?php

namespace App\MessageHandler;

use App\Message\CountMe;
use Doctrine\DBAL\Connection;
use Symfony\Component\Messenger\Handler\MessageHandlerInterface;

/**
 * Counts each run of a message in `handled`: an execution when it starts, a
 * completion when it ends (each committed on its own), and who ran it first: the
 * tableq queue (its worker's TABLEQ_QUEUE) or messenger:consume, and when.
 */
final class CountMeHandler implements MessageHandlerInterface
{
    private $db;

    public function __construct(Connection $db)
    {
        $this->db = $db;
    }

    public function __invoke(CountMe $message): void
    {
        $this->db->executeStatement(
            'INSERT INTO handled (number, executions, completions, via, first_at) VALUES (?, 1, 0, ?, UTC_TIMESTAMP(3))
             ON DUPLICATE KEY UPDATE executions = executions + 1',
            [$message->number, getenv('TABLEQ_QUEUE') ?: 'messenger:consume']
        );
        if ($message->workMs > 0) {
            usleep($message->workMs * 1000);
        }
        echo "handled {$message->number}\n"; // a stray echo: must not reach tableq's answers
        $this->db->executeStatement('UPDATE handled SET completions = completions + 1 WHERE number = ?', [$message->number]);
    }
}
