import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * The transactional outbox of lifecycle events, the keys of events already sent (kept after their
 * rows are pruned, so a late re-enqueue is still recognised), and `enqueue_event`, the function a
 * partner's application calls in its own transaction.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).createTable('events_outbox', (t) => {
    t.bigIncrements('id');
    t.text('idempotency_key').notNullable().unique({ indexName: 'events_outbox_key_key' });
    t.text('email');
    t.text('contact_id');
    t.text('event_type').notNullable();
    t.text('professional_id');
    t.jsonb('metadata');
    t.text('source').notNullable();
    t.text('state').notNullable().defaultTo('pending');
    t.integer('attempts').notNullable().defaultTo(0);
    t.timestamp('next_attempt_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.text('claimed_by');
    t.timestamp('lease_expires_at', { useTz: true });
    t.boolean('possible_duplicate').notNullable().defaultTo(false);
    t.text('platform_event_id');
    t.text('platform_status');
    t.text('last_error');
    t.timestamp('enqueued_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('sent_at', { useTz: true });
  });
  const table = `${schema}.events_outbox`;
  await knex.raw(
    `alter table ?? add constraint events_outbox_state_check
       check (state in ('pending', 'sending', 'sent', 'failed', 'parked')),
     add constraint events_outbox_recipient_check check (email is not null or contact_id is not null)`,
    [table],
  );
  // The claim reads due rows in order; sent and failed rows are not in these indexes at all.
  await knex.raw(`create index events_outbox_due_idx on ?? (next_attempt_at, id) where state = 'pending'`, [
    table,
  ]);
  await knex.raw(`create index events_outbox_lease_idx on ?? (lease_expires_at) where state = 'sending'`, [
    table,
  ]);
  await knex.raw(`create index events_outbox_sent_idx on ?? (sent_at) where state = 'sent'`, [table]);

  await knex.schema.withSchema(schema).createTable('event_keys', (t) => {
    t.text('idempotency_key').primary();
    t.timestamp('sent_at', { useTz: true }).notNullable();
  });

  // SECURITY DEFINER with a fixed search_path: a role granted EXECUTE can enqueue without any
  // right on the tables, and cannot redirect the function to objects of its own.
  await knex.raw(
    `create function ??(email text, event_type text, idempotency_key text, metadata jsonb default null)
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
       if exists (select 1 from ${quoteIdent(schema)}.event_keys k where k.idempotency_key = enqueue_event.idempotency_key) then
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

  await commentOn(knex, schema, 'events_outbox', {
    table:
      "The outbox of lifecycle events: every event is written here first (by enqueue_event in the partner's own transaction, the CLI, event files or CRM rules) and sent to the platform once by the daemon. Sent rows are pruned after EVENTS_RETENTION_DAYS; their keys stay in event_keys.",
    columns: {
      id: 'Order of enqueueing.',
      idempotency_key:
        'Unique key of the event: given by the source, or derived (email + type + source row). A key already known is never sent again.',
      email: 'Recipient, by email (or contact_id).',
      contact_id: "Recipient, by the platform's contact id (or email).",
      event_type: 'Dotted event name, e.g. matter.closed.',
      professional_id: 'Professional the event concerns, if any.',
      metadata: 'JSON object sent with the event.',
      source: 'Where it came from: sql (enqueue_event), cli, file or rule.',
      state:
        'pending (to send), sending (claimed by a worker until lease_expires_at), sent, failed (for good: see last_error) or parked (outcome unknown; an operator decides with events retry / events discard).',
      attempts: 'Requests made for it so far.',
      next_attempt_at: 'When a pending event is due (later after a failure: backoff).',
      claimed_by: 'The daemon (host, pid) that claimed it last.',
      lease_expires_at:
        'A claim not finished by then is taken as a dead worker: the outcome of its request is unknown.',
      possible_duplicate:
        'Sent again after a request whose outcome was unknown (timeout, lost connection, dead worker): the platform may have it twice.',
      platform_event_id: "The platform's event id, from its answer.",
      platform_status: "The platform's status, from its answer (queued).",
      last_error: 'Why the last attempt failed (scrubbed of secrets).',
      enqueued_at: 'When it was written to the outbox.',
      sent_at: 'When the platform accepted it.',
    },
  });
  await commentOn(knex, schema, 'event_keys', {
    table:
      'Keys of events sent whose outbox rows were pruned, kept EVENTS_KEY_RETENTION_DAYS so that a late re-enqueue of the same key is still recognised and not sent again.',
    columns: {
      idempotency_key: 'The key of a sent event.',
      sent_at: 'When it was sent.',
    },
  });
  await knex.raw(
    `comment on function ??(text, text, text, jsonb) is 'Enqueues a lifecycle event in the caller''s transaction: select ${schema}.enqueue_event(''ana@example.com'', ''matter.closed'', ''matter-1234-closed''). Returns true when enqueued, false when the key is already known (never sent twice). Sent within milliseconds of the commit (NOTIFY); a rolled-back transaction sends nothing.'`,
    [`${schema}.enqueue_event`],
  );
}

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;
const quoteLiteral = (text: string): string => `'${text.replaceAll("'", "''")}'`;
