<?php

namespace App\Command;

use App\Message\CountMe;
use App\Message\Exhaust;
use App\Message\Explode;
use Symfony\Component\Console\Command\Command;
use Symfony\Component\Console\Input\InputArgument;
use Symfony\Component\Console\Input\InputInterface;
use Symfony\Component\Console\Input\InputOption;
use Symfony\Component\Console\Output\OutputInterface;
use Symfony\Component\Messenger\MessageBusInterface;
use Symfony\Component\Messenger\Stamp\DelayStamp;

/** `app:dispatch count|explode|exhaust N [--work-ms=MS] [--delay-ms=MS]`: $bus->dispatch(...) N times. */
final class DispatchCommand extends Command
{
    protected static $defaultName = 'app:dispatch';

    private $bus;

    public function __construct(MessageBusInterface $bus)
    {
        $this->bus = $bus;
        parent::__construct();
    }

    protected function configure(): void
    {
        $this->addArgument('kind', InputArgument::REQUIRED)
            ->addArgument('count', InputArgument::OPTIONAL, '', '1')
            ->addOption('first', null, InputOption::VALUE_REQUIRED, 'the first message\'s number', '1')
            ->addOption('work-ms', null, InputOption::VALUE_REQUIRED, '', '0')
            ->addOption('delay-ms', null, InputOption::VALUE_REQUIRED, 'a DelayStamp', '0');
    }

    protected function execute(InputInterface $input, OutputInterface $output): int
    {
        $first = (int) $input->getOption('first');
        $delay = (int) $input->getOption('delay-ms');
        for ($number = $first; $number < $first + (int) $input->getArgument('count'); ++$number) {
            switch ($input->getArgument('kind')) {
                case 'count': $message = new CountMe($number, (int) $input->getOption('work-ms')); break;
                case 'explode': $message = new Explode($number); break;
                case 'exhaust': $message = new Exhaust(); break;
                default: throw new \InvalidArgumentException('count, explode or exhaust');
            }
            $this->bus->dispatch($message, $delay > 0 ? [new DelayStamp($delay)] : []);
        }

        return 0;
    }
}
