-- A chain: step 1 scans each upload; step 2 makes a thumbnail of the clean ones.
CREATE TABLE uploads (
  id             BIGINT AUTO_INCREMENT PRIMARY KEY,
  path           VARCHAR(255) NOT NULL,
  scanned_at     TIMESTAMP(6) NULL,
  thumbnailed_at TIMESTAMP(6) NULL,
  error          TEXT NULL,
  KEY scanned (scanned_at, id),
  KEY thumbnailed (thumbnailed_at, id)
) ENGINE=InnoDB;

-- Step 1's results: what step 2 reads.
CREATE TABLE scans (
  upload_id BIGINT PRIMARY KEY,
  clean     BOOLEAN NOT NULL
) ENGINE=InnoDB;

CREATE TABLE thumbnails (
  upload_id BIGINT PRIMARY KEY,
  made_at   TIMESTAMP(6) NOT NULL DEFAULT NOW(6)
) ENGINE=InnoDB;
