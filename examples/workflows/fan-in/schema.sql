-- Fan-in: an order is complete once every one of its items is done.
-- The application writes an order and its items in ONE transaction: an open order
-- with no items yet would match the orders queue's select at once.
CREATE TABLE orders (
  id           BIGINT PRIMARY KEY,
  state        VARCHAR(10) NOT NULL DEFAULT 'open',   -- open | completed | failed
  completed_at TIMESTAMP(6) NULL,
  KEY state_id (state, id)
) ENGINE=InnoDB;

CREATE TABLE order_items (
  id       BIGINT AUTO_INCREMENT PRIMARY KEY,
  order_id BIGINT NOT NULL,
  state    VARCHAR(10) NOT NULL DEFAULT 'new',        -- new | done | failed
  done_at  TIMESTAMP(6) NULL,
  KEY state_id (state, id),
  -- the orders queue's NOT EXISTS looks an order's items up by this index
  KEY order_state (order_id, state)
) ENGINE=InnoDB;

-- What completing an order does, here a row (an invoice, an email, a webhook).
CREATE TABLE order_log (
  order_id  BIGINT NOT NULL,
  logged_at TIMESTAMP(6) NOT NULL DEFAULT NOW(6),
  KEY (order_id)
) ENGINE=InnoDB;
