-- Webhook subscriptions (DELIVERY.md "Webhooks"), written by the admin API and the
-- dispatcher of the replica that owns the `webhooks` processor.
--
-- `position` is the subscription's cursor: every event up to it was delivered or did not
-- match its `types` (a JSON array of filters). `generation` grows with every resume; the
-- dispatcher's writes name the generation they were started with, so a loop that a
-- resume (or a delete) overtook writes nothing. `last_error` is the failing delivery
-- (JSON), kept while it is retried and after it paused the subscription.
CREATE TABLE IF NOT EXISTS webhooks
(
    id         text PRIMARY KEY,
    url        text    NOT NULL,
    types      text    NOT NULL,
    secret     text    NOT NULL,
    state      text    NOT NULL,
    position   integer NOT NULL,
    generation integer NOT NULL DEFAULT 0,
    last_error text,
    created_at text    NOT NULL,
    updated_at text    NOT NULL
) STRICT;
