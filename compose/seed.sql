-- A few rows for docker-compose.yml: emails (one to an address the stand-in mailer
-- refuses) and webhook events.
INSERT INTO email (recipient, subject, body) VALUES
  ('ada@example.com', 'Hello Ada', 'Your order has shipped.'),
  ('grace@example.com', 'Hello Grace', 'Your invoice is ready.'),
  ('nobody@invalid.example', 'Hello?', 'This one cannot be sent.');

INSERT INTO webhook_delivery (endpoint_url, event_type, payload) VALUES
  ('http://receiver:8080/events', 'order.created', '{"order": 1}'),
  ('http://receiver:8080/events', 'order.paid', '{"order": 1, "amount": 42}');
