<?php

namespace App\MessageHandler;

use App\Message\Explode;
use Doctrine\DBAL\Connection;
use Symfony\Component\Messenger\Handler\MessageHandlerInterface;

/** Notes each attempt in `attempts`, then throws. */
final class ExplodeHandler implements MessageHandlerInterface
{
    private $db;

    public function __construct(Connection $db)
    {
        $this->db = $db;
    }

    public function __invoke(Explode $message): void
    {
        $this->db->executeStatement('INSERT INTO attempts (number, at) VALUES (?, UTC_TIMESTAMP(3))', [$message->number]);

        throw new \RuntimeException("boom {$message->number}");
    }
}
