<?php

namespace Tableq\Symfony\DependencyInjection;

use Symfony\Component\DependencyInjection\Compiler\CompilerPassInterface;
use Symfony\Component\DependencyInjection\Compiler\ServiceLocatorTagPass;
use Symfony\Component\DependencyInjection\ContainerBuilder;
use Symfony\Component\DependencyInjection\Reference;

/**
 * Gives tableq:consume each transport's own serializer, by transport name: the
 * third argument FrameworkBundle passes to the transport factory for every
 * transport of `framework.messenger.transports` (its `serializer`, or
 * `messenger.default_serializer`). The transport objects keep it private.
 */
final class TransportSerializersPass implements CompilerPassInterface
{
    public function process(ContainerBuilder $container): void
    {
        if (!$container->hasDefinition('tableq.command.consume')) {
            return;
        }
        if (!$container->has('messenger.routable_message_bus') || !$container->has('messenger.receiver_locator')) {
            $container->removeDefinition('tableq.command.consume'); // Messenger is off

            return;
        }
        $serializers = [];
        foreach ($container->findTaggedServiceIds('messenger.receiver') as $id => $tags) {
            $arguments = $container->getDefinition($id)->getArguments();
            $serializer = $arguments[2] ?? null;
            if (!$serializer instanceof Reference) {
                continue; // a transport service of the app's own: no serializer to read
            }
            foreach ($tags as $tag) {
                $serializers[$tag['alias'] ?? $id] = $serializer;
            }
        }
        $container->getDefinition('tableq.command.consume')
            ->replaceArgument(2, ServiceLocatorTagPass::register($container, $serializers));
    }
}
