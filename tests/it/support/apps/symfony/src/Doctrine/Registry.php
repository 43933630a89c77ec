<?php

namespace App\Doctrine;

use Doctrine\DBAL\Connection;
use Doctrine\Persistence\ConnectionRegistry;

/** The one connection, "default", as DoctrineBundle's registry gives it. */
final class Registry implements ConnectionRegistry
{
    private $connection;

    public function __construct(Connection $connection)
    {
        $this->connection = $connection;
    }

    public function getDefaultConnectionName()
    {
        return 'default';
    }

    public function getConnection(?string $name = null)
    {
        if (null !== $name && 'default' !== $name) {
            throw new \InvalidArgumentException(sprintf('Doctrine connection named "%s" does not exist.', $name));
        }

        return $this->connection;
    }

    public function getConnections()
    {
        return ['default' => $this->connection];
    }

    public function getConnectionNames()
    {
        return ['default' => 'doctrine.dbal.default_connection'];
    }
}
