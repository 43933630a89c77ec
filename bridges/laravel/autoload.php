<?php

// For an application without Composer (or before `composer require`): a PSR-4
// autoloader for Tableq\Laravel\ from src/. Require it before the application boots
// (in artisan, after the framework's own autoloader), then list
// Tableq\Laravel\TableqServiceProvider in config/app.php's providers.

spl_autoload_register(static function (string $class): void {
    $prefix = 'Tableq\\Laravel\\';
    if (strncmp($class, $prefix, strlen($prefix)) !== 0) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});
