<?php

namespace App\Message;

/** A message whose handler always throws. */
final class Explode
{
    public $number;

    public function __construct(int $number)
    {
        $this->number = $number;
    }
}
