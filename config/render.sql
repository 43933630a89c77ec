-- The table behind config/render.toml, the lease-mode sibling of the email queue:
-- videos to render, each a job of minutes (here: `seconds`). A worker leases a row
-- (state 'rendering', lease_until, lease_id, worker), commits, and renders with no
-- transaction held; renewals move lease_until on and record `progress`. A row whose
-- lease has expired — its worker crashed — is waiting again.
CREATE TABLE video (
    id          BIGINT NOT NULL AUTO_INCREMENT,
    title       VARCHAR(250) NOT NULL,
    seconds     INT NOT NULL,
    state       ENUM('waiting', 'rendering', 'done', 'failed') NOT NULL DEFAULT 'waiting',
    lease_until DATETIME NULL,          -- UTC: written and compared with UTC_TIMESTAMP()
    lease_id    CHAR(32) NULL,
    worker      VARCHAR(255) NULL,
    progress    VARCHAR(255) NULL,
    attempts    INT NOT NULL DEFAULT 0,
    error       TEXT NULL,
    PRIMARY KEY (id),
    INDEX state_lease (state, lease_until)
) DEFAULT CHARSET=utf8mb4;
