<?php

namespace Tableq\Symfony\Command;

use Psr\Container\ContainerInterface;
use Psr\Log\LoggerInterface;
use Symfony\Component\Console\Command\Command;
use Symfony\Component\Console\Exception\RuntimeException;
use Symfony\Component\Console\Input\InputArgument;
use Symfony\Component\Console\Input\InputInterface;
use Symfony\Component\Console\Input\InputOption;
use Symfony\Component\Console\Output\OutputInterface;
use Symfony\Component\EventDispatcher\EventDispatcherInterface;
use Symfony\Component\Messenger\Event\WorkerMessageFailedEvent;
use Symfony\Component\Messenger\EventListener\ResetServicesListener;
use Symfony\Component\Messenger\RoutableMessageBus;
use Symfony\Component\Messenger\Worker;
use Tableq\Symfony\Transport\AnswerChannel;
use Tableq\Symfony\Transport\ProtocolReceiver;

/**
 * `bin/console tableq:consume <transport>`: tableq's worker for a Doctrine
 * transport. What `messenger:consume <transport>` does, with the rows coming
 * from tableq on stdin instead of the transport's own get(): Symfony's Worker,
 * the app's bus and event dispatcher, so the ReceivedStamp, the transport's
 * retry strategy, its failure transport and the worker events are Symfony's own.
 */
final class ConsumeCommand extends Command
{
    protected static $defaultName = 'tableq:consume';
    protected static $defaultDescription = 'Handles the rows tableq hands over on stdin (tableq\'s worker protocol) as messenger:consume would';

    private $bus;
    private $receivers;
    private $serializers;
    private $events;
    private $logger;
    private $resetServices;

    public function __construct(RoutableMessageBus $bus, ContainerInterface $receivers, ContainerInterface $serializers, EventDispatcherInterface $events, ?LoggerInterface $logger = null, ?ResetServicesListener $resetServices = null)
    {
        $this->bus = $bus;
        $this->receivers = $receivers;
        $this->serializers = $serializers;
        $this->events = $events;
        $this->logger = $logger;
        $this->resetServices = $resetServices;
        parent::__construct();
    }

    protected function configure(): void
    {
        $this
            ->addArgument('transport', InputArgument::REQUIRED, 'The transport whose table tableq reads (its serializer decodes the rows)')
            ->addOption('bus', 'b', InputOption::VALUE_REQUIRED, 'The bus to dispatch to (default: the one the message was sent on, as messenger:consume)')
            ->addOption('no-reset', null, InputOption::VALUE_NONE, 'Do not reset container services after each message')
            ->setHelp(<<<'EOF'
The <info>%command.name%</info> command is started by tableq (an [action] of type "worker"):
it reads one JSON row per line on stdin and answers one JSON line per row on stdout.
Everything else the application prints goes to stderr.

    <info>php %command.full_name% async</info>
EOF
            );
    }

    protected function execute(InputInterface $input, OutputInterface $output): int
    {
        $answers = AnswerChannel::takeStdout();
        $name = $input->getArgument('transport');
        if (!$this->receivers->has($name) || !$this->serializers->has($name)) {
            throw new RuntimeException(sprintf('The transport "%s" does not exist (or has no serializer tableq:consume can find).', $name));
        }
        $receiver = new ProtocolReceiver(\STDIN, $name, $this->serializers->get($name), $answers);
        $this->events->addListener(WorkerMessageFailedEvent::class, static function (WorkerMessageFailedEvent $event) use ($name, $receiver): void {
            if ($event->getReceiverName() === $name) {
                $receiver->failedWith($event->getThrowable());
            }
        }, -1000);
        if (null !== $this->resetServices && !$input->getOption('no-reset')) {
            $this->events->addSubscriber($this->resetServices);
        }
        $bus = $input->getOption('bus') ? $this->bus->getMessageBus($input->getOption('bus')) : $this->bus;
        $worker = new Worker([$name => $receiver], $bus, $this->events, $this->logger);
        $receiver->stopAtEnd($worker);
        // The receiver blocks on stdin; an empty get() only happens at the end of
        // the input or while a batch handler holds a message: no sleep then.
        $worker->run(['sleep' => 10000]);

        return 0;
    }
}
