<?php

use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;

return static function (ContainerConfigurator $container): void {
    $services = $container->services()->defaults()->autowire()->autoconfigure();
    $services->load('App\\', __DIR__.'/../src/')->exclude([__DIR__.'/../src/Kernel.php', __DIR__.'/../src/Message/', __DIR__.'/../src/Doctrine/']);
};
