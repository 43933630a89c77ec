<?php

namespace App\MessageHandler;

use App\Message\Exhaust;
use Symfony\Component\Messenger\Handler\MessageHandlerInterface;

/** Runs out of memory: a fatal error no try/catch sees. */
final class ExhaustHandler implements MessageHandlerInterface
{
    public function __invoke(Exhaust $message): void
    {
        ini_set('memory_limit', '64M');
        $chunks = [];
        while (true) {
            $chunks[] = str_repeat('x', 1 << 20);
        }
    }
}
