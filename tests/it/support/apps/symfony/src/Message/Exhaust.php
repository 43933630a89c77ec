<?php

namespace App\Message;

/** A message whose handler dies of a PHP fatal error (memory exhausted). */
final class Exhaust
{
}
