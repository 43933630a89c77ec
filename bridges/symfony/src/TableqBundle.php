<?php

namespace Tableq\Symfony;

use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\DependencyInjection\ContainerInterface;
use Symfony\Component\DependencyInjection\Reference;
use Symfony\Component\HttpKernel\Bundle\Bundle;
use Tableq\Symfony\Command\ConsumeCommand;
use Tableq\Symfony\DependencyInjection\TransportSerializersPass;

/**
 * tableq as the worker of Messenger's Doctrine transport: registers
 * `bin/console tableq:consume <transport>`.
 */
final class TableqBundle extends Bundle
{
    public function build(ContainerBuilder $container): void
    {
        $container->register('tableq.command.consume', ConsumeCommand::class)
            ->setArguments([
                new Reference('messenger.routable_message_bus'),
                new Reference('messenger.receiver_locator'),
                null, // the serializer of each transport: TransportSerializersPass
                new Reference('event_dispatcher'),
                new Reference('logger', ContainerInterface::NULL_ON_INVALID_REFERENCE),
                new Reference('messenger.listener.reset_services', ContainerInterface::NULL_ON_INVALID_REFERENCE),
            ])
            ->addTag('console.command', ['command' => 'tableq:consume'])
            ->addTag('monolog.logger', ['channel' => 'messenger']);
        $container->addCompilerPass(new TransportSerializersPass());
    }
}
