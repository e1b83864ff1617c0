import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * event_keys becomes the gate of enqueueing: a key is inserted there when its event is enqueued
 * and stays for as long as it is remembered, instead of being copied there when its sent row is
 * pruned. The check-then-insert of 011 let a key through while the prune moved it (the outbox row
 * deleted, the key not committed yet), and the event was sent twice. `enqueue_event` keeps its
 * signature and its answers; only its body changes.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  const outbox = `${schema}.events_outbox`;
  const keys = `${schema}.event_keys`;
  await knex.raw('alter table ?? alter column sent_at drop not null', [keys]);
  // No row enters the outbox while its keys are copied (the migration's transaction holds this
  // until it commits), so none is left without its key. Claims and outcome writes wait as well,
  // for as long as the copy takes.
  await knex.raw('lock table ?? in share mode', [outbox]);
  await knex.raw(
    `insert into ?? (idempotency_key) select idempotency_key from ?? on conflict (idempotency_key) do nothing`,
    [keys, outbox],
  );

  // As in 011: SECURITY DEFINER with a fixed search_path. The key is inserted first, and only a key
  // new to event_keys is enqueued: a concurrent caller of the same key waits for this transaction
  // and then finds it. The outbox insert keeps its ON CONFLICT for rows enqueued by a replica still
  // running a version older than this migration, whose keys are not in event_keys.
  await knex.raw(
    `create or replace function ??(email text, event_type text, idempotency_key text, metadata jsonb default null)
     returns boolean
     language plpgsql security definer set search_path = pg_catalog, pg_temp
     as $fn$
     #variable_conflict use_column
     declare
       inserted boolean;
     begin
       if email is null or email !~ '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$' then
         raise exception 'enqueue_event: email must be an email address, got %', coalesce(email, 'null')
           using errcode = '22023';
       end if;
       if event_type is null or event_type !~ '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$' or length(event_type) > 200 then
         raise exception 'enqueue_event: event_type must be a dotted name such as matter.closed, got %', coalesce(event_type, 'null')
           using errcode = '22023';
       end if;
       if idempotency_key is null or length(idempotency_key) = 0 or length(idempotency_key) > 500 then
         raise exception 'enqueue_event: idempotency_key must be 1 to 500 characters' using errcode = '22023';
       end if;
       if metadata is not null and jsonb_typeof(metadata) <> 'object' then
         raise exception 'enqueue_event: metadata must be a JSON object' using errcode = '22023';
       end if;
       insert into ${quoteIdent(schema)}.event_keys (idempotency_key)
       values (enqueue_event.idempotency_key)
       on conflict (idempotency_key) do nothing;
       get diagnostics inserted = row_count;
       if not inserted then
         return false;
       end if;
       insert into ${quoteIdent(schema)}.events_outbox (idempotency_key, email, event_type, metadata, source)
       values (enqueue_event.idempotency_key, enqueue_event.email, enqueue_event.event_type, enqueue_event.metadata, 'sql')
       on conflict (idempotency_key) do nothing;
       get diagnostics inserted = row_count;
       if inserted then
         perform pg_notify(${quoteLiteral(`${schema}_events_outbox`)}, '');
       end if;
       return inserted;
     end
     $fn$`,
    [`${schema}.enqueue_event`],
  );

  await commentOn(knex, schema, 'event_keys', {
    table:
      'Every idempotency key enqueued, from its enqueueing on: only a key new to this table is enqueued, so the same key is never sent twice. A key stays while its event is in the outbox and, once its sent row is pruned, EVENTS_KEY_RETENTION_DAYS after it was sent; then it is forgotten and may be enqueued again.',
    columns: {
      idempotency_key: 'The key of an event enqueued.',
      sent_at:
        'When it was sent, recorded when its outbox row is pruned; null while the row is in the outbox (whatever its state).',
    },
  });
  await knex.raw(
    `comment on function ??(text, text, text, jsonb) is 'Enqueues a lifecycle event in the caller''s transaction: select ${schema}.enqueue_event(''ana@example.com'', ''matter.closed'', ''matter-1234-closed''). Returns true when enqueued, false when the key is already known (enqueued before, or sent within EVENTS_KEY_RETENTION_DAYS: never sent twice). Sent within milliseconds of the commit (NOTIFY); a rolled-back transaction sends nothing.'`,
    [`${schema}.enqueue_event`],
  );
}

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;
const quoteLiteral = (text: string): string => `'${text.replaceAll("'", "''")}'`;
