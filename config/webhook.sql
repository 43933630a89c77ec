-- The table behind config/webhook.toml: one row per event to deliver, each to the
-- endpoint its subscriber registered.
CREATE TABLE webhook_delivery (
    id            BIGINT NOT NULL AUTO_INCREMENT,
    endpoint_url  VARCHAR(2000) NOT NULL,
    event_type    VARCHAR(100) NOT NULL,
    payload       JSON NOT NULL,
    status        ENUM('pending', 'delivered', 'failed') NOT NULL DEFAULT 'pending',
    attempts      INT NOT NULL DEFAULT 0,
    next_attempt  BIGINT NULL,
    last_status   INT NULL,
    last_error    VARCHAR(1000) NULL,
    created_at    TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (id),
    INDEX (status, next_attempt),
    INDEX status_id (status, id)
) DEFAULT CHARSET=utf8mb4;
