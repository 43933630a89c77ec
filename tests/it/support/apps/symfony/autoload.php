<?php

// What Composer's vendor/autoload.php would be: Debian's packages of Symfony 5.4
// and Doctrine DBAL, the tableq bridge through its own autoload.php, and App\.
require_once '/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php';
require_once '/usr/share/php/Symfony/Component/Console/autoload.php';
require_once '/usr/share/php/Symfony/Component/Messenger/autoload.php';
require_once '/usr/share/php/Symfony/Component/Messenger/Bridge/Doctrine/autoload.php';
require_once '/usr/share/php/Doctrine/DBAL/autoload.php';
require_once '/usr/share/php/Doctrine/Persistence/autoload.php';
require_once __DIR__.'/bridge/autoload.php'; // a link to the repository's bridges/symfony, made by tests/it/support/symfony.rs

spl_autoload_register(static function (string $class): void {
    if (0 === strncmp($class, 'App\\', 4)) {
        $file = __DIR__.'/src/'.str_replace('\\', '/', substr($class, 4)).'.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
