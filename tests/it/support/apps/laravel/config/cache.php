<?php

return [
    'default' => 'array',

    'stores' => [
        'array' => [
            'driver' => 'array',
            'serialize' => false,
        ],
    ],

    'prefix' => 'tableq_test_cache',
];
