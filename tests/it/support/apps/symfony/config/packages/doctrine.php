<?php

// What DoctrineBundle registers (Debian 12 has no package of it): the DBAL
// connection "default", the `doctrine` registry, and Messenger's Doctrine
// transport factory.

use App\Doctrine\Registry;
use Doctrine\DBAL\Connection;
use Doctrine\DBAL\DriverManager;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\Messenger\Bridge\Doctrine\Transport\DoctrineTransportFactory;

use function Symfony\Component\DependencyInjection\Loader\Configurator\service;

return static function (ContainerConfigurator $container): void {
    $services = $container->services();
    $services->set('doctrine.dbal.default_connection', Connection::class)
        ->factory([DriverManager::class, 'getConnection'])
        ->args([['url' => '%env(DATABASE_URL)%']])
        ->public();
    $services->alias(Connection::class, 'doctrine.dbal.default_connection');
    $services->set('doctrine', Registry::class)
        ->args([service('doctrine.dbal.default_connection')]);
    $services->set('messenger.transport.doctrine.factory', DoctrineTransportFactory::class)
        ->args([service('doctrine')])
        ->tag('messenger.transport_factory');
};
