<?php

use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;

return static function (ContainerConfigurator $container): void {
    $container->extension('framework', [
        'secret' => 'tableq-test',
        'http_method_override' => false,
        'messenger' => [
            'failure_transport' => 'failed',
            'transports' => [
                'async' => [
                    'dsn' => 'doctrine://default?queue_name=default',
                    'retry_strategy' => ['max_retries' => 2, 'delay' => 1000, 'multiplier' => 2],
                ],
                'failed' => 'doctrine://default?queue_name=failed',
            ],
            'routing' => [
                'App\Message\CountMe' => 'async',
                'App\Message\Explode' => 'async',
                'App\Message\Exhaust' => 'async',
            ],
        ],
    ]);
};
