<?php

// The bridge's classes for an application without Composer: require this file
// (Composer users get the same from composer.json's PSR-4 entry).
spl_autoload_register(static function (string $class): void {
    $prefix = 'Tableq\\Symfony\\';
    if (0 !== strncmp($class, $prefix, \strlen($prefix))) {
        return;
    }
    $file = __DIR__.'/src/'.str_replace('\\', '/', substr($class, \strlen($prefix))).'.php';
    if (is_file($file)) {
        require $file;
    }
});
