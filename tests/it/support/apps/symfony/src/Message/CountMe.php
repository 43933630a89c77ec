<?php

namespace App\Message;

/** A message whose handler counts its executions and completions. */
final class CountMe
{
    public $number;
    public $workMs;

    public function __construct(int $number, int $workMs = 0)
    {
        $this->number = $number;
        $this->workMs = $workMs;
    }
}
