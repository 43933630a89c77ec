-- Debounce: the application asks for a document to be re-indexed whenever it
-- changes; a burst of changes should cost one re-index, of the newest request.
CREATE TABLE reindex_requests (
  id           BIGINT AUTO_INCREMENT PRIMARY KEY,
  doc_id       BIGINT NOT NULL,
  state        VARCHAR(10) NOT NULL DEFAULT 'waiting',  -- waiting | done | superseded | failed
  requested_at TIMESTAMP(6) NOT NULL DEFAULT NOW(6),
  KEY state_id (state, id),
  KEY doc_id (doc_id, id)
) ENGINE=InnoDB;

-- What a re-index does, here a row.
CREATE TABLE reindexed (
  doc_id     BIGINT NOT NULL,
  request_id BIGINT NOT NULL,
  KEY (doc_id)
) ENGINE=InnoDB;
