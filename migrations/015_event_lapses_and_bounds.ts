import type { Knex } from 'knex';
import { commentOn } from './commentOn.js';

/**
 * Two guards of the outbox.
 *
 * `lapsed_claims` counts the claims of an event that lapsed unanswered (the worker died or hung on
 * it). Only an answer was ever checked against a limit: an event that kills its worker every time
 * was taken back and claimed again for ever. Taking a claim back now fails the event at its third
 * lapse, and this count says in last_error why it stopped.
 *
 * `enqueue_event` bounds what a caller can put in the outbox: metadata to 16 KiB, and an email's
 * length as the other sources do (320). Its signature, its answers and the keys gate of 014 are
 * unchanged; only its body is replaced.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.schema.withSchema(schema).alterTable('events_outbox', (t) => {
    t.integer('lapsed_claims').notNullable().defaultTo(0);
  });
  await commentOn(knex, schema, 'events_outbox', {
    columns: {
      lapsed_claims:
        'Claims of it that lapsed with no answer recorded (its worker died, hung or was cut off). At the third (or at EVENTS_MAX_ATTEMPTS, if fewer) the event is failed under EVENTS_UNKNOWN_OUTCOME=retry, so an event that kills its worker is not claimed for ever.',
    },
  });

  // As in 014, with the bounds checked before any value is echoed in an error: a multi-megabyte
  // argument must not come back in the caller's error (and its logs). Metadata is bounded to
  // 16 KiB of JSON text as PostgreSQL prints it (`metadata::text`; the body POSTed is a little
  // smaller, without the space after each colon and comma): a campaign needs ids and names, not
  // documents. The platform's body limit is not published; 16 KiB keeps the whole body far below
  // the 100 kB that Node servers accept by default (body-parser), and a backlog of a million
  // events under 16 GB. The same bound applies to files and the CLI (src/push/events/eventInput.ts).
  await knex.raw(
    `create or replace function ??(email text, event_type text, idempotency_key text, metadata jsonb default null)
     returns boolean
     language plpgsql security definer set search_path = pg_catalog, pg_temp
     as $fn$
     #variable_conflict use_column
     declare
       inserted boolean;
       metadata_bytes integer;
     begin
       if length(email) > 320 then
         raise exception 'enqueue_event: email must be at most 320 characters, got %', length(email)
           using errcode = '22023';
       end if;
       if email is null or email !~ '^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$' then
         raise exception 'enqueue_event: email must be an email address, got %', coalesce(email, 'null')
           using errcode = '22023';
       end if;
       if length(event_type) > 200 then
         raise exception 'enqueue_event: event_type must be at most 200 characters, got %', length(event_type)
           using errcode = '22023';
       end if;
       if event_type is null or event_type !~ '^[A-Za-z0-9_-]+(\\.[A-Za-z0-9_-]+)*$' then
         raise exception 'enqueue_event: event_type must be a dotted name such as matter.closed, got %', coalesce(event_type, 'null')
           using errcode = '22023';
       end if;
       if idempotency_key is null or length(idempotency_key) = 0 or length(idempotency_key) > 500 then
         raise exception 'enqueue_event: idempotency_key must be 1 to 500 characters' using errcode = '22023';
       end if;
       if metadata is not null and jsonb_typeof(metadata) <> 'object' then
         raise exception 'enqueue_event: metadata must be a JSON object' using errcode = '22023';
       end if;
       metadata_bytes := octet_length(metadata::text);
       if metadata_bytes > 16384 then
         raise exception 'enqueue_event: metadata of key % is % bytes of JSON, more than 16384 (16 KiB)', idempotency_key, metadata_bytes
           using errcode = '22023',
                 hint = 'Send what the campaign needs (ids, names, a date), not documents.';
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
  await knex.raw(
    `comment on function ??(text, text, text, jsonb) is 'Enqueues a lifecycle event in the caller''s transaction: select ${schema}.enqueue_event(''ana@example.com'', ''matter.closed'', ''matter-1234-closed''). Returns true when enqueued, false when the key is already known (enqueued before, or sent within EVENTS_KEY_RETENTION_DAYS: never sent twice). Raises (SQLSTATE 22023) on an argument that cannot be sent: an email that is not one or is over 320 characters, an event type that is not a dotted name of up to 200, a key of more than 500, metadata that is not a JSON object or is over 16 KiB as text. Sent within milliseconds of the commit (NOTIFY); a rolled-back transaction sends nothing.'`,
    [`${schema}.enqueue_event`],
  );
}

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;
const quoteLiteral = (text: string): string => `'${text.replaceAll("'", "''")}'`;
