import type { Knex } from 'knex';

/**
 * `enqueue_event` refuses metadata holding a number a JSON reader would not carry as written.
 * jsonb keeps any number exactly, but the daemon reads the row with JSON.parse and the platform
 * with a reader no more exact: `1e400` is read as Infinity, which JSON writes as null; `1e-400` as
 * 0; `0.1000000000000000000001` as 0.1; `12345678901234567890` rounded. The sender fails such an
 * event at its turn (it is never sent altered), but the caller learns it only later, from the
 * outbox: refused here, the caller's transaction learns it at once, as files and the CLI do
 * (src/push/jsonText.ts). A number written otherwise but worth the same (`1.50`, `1E2`) is taken.
 * The checks run on PostgreSQL's numeric, in an order that never casts a value float8 cannot hold
 * (that cast raises); `extra_float_digits = 1` makes float8's text its shortest exact form, however
 * the caller's session sets it. Subnormal doubles (below 2.2250738585072014e-308) are refused too,
 * as PostgreSQL's float8 refuses them. Its signature, answers and other checks are 015's; only its
 * body is replaced.
 */
export async function up(knex: Knex, schema: string): Promise<void> {
  await knex.raw(
    `create or replace function ??(email text, event_type text, idempotency_key text, metadata jsonb default null)
     returns boolean
     language plpgsql security definer set search_path = pg_catalog, pg_temp set extra_float_digits = 1
     as $fn$
     #variable_conflict use_column
     declare
       inserted boolean;
       metadata_bytes integer;
       inexact text;
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
       -- A number a JSON reader would not carry as written (see the comment above).
       select left(n::text, 40) || case when length(n::text) > 40 then '…' else '' end || ' ' || why
         into inexact
         from jsonb_path_query(metadata, 'strict $.**') as n,
              lateral (select case
                when abs(n::numeric) > 1.7976931348623157e308
                  then 'is too large for a JSON reader (it would be sent as null)'
                when n::numeric <> 0 and abs(n::numeric) < 2.2250738585072014e-308
                  then 'is too small for a JSON reader (it would be sent as 0)'
                when abs(n::numeric) > 9007199254740991 and n::numeric = trunc(n::numeric)
                  then 'is a whole number past 2^53, which is not carried exactly'
                when n::numeric::float8::text::numeric <> n::numeric
                  then 'has more digits than a JSON reader carries (it would be sent as '
                       || n::numeric::float8::text || ')'
              end as why) as reason
        where jsonb_typeof(n) = 'number' and why is not null
        limit 1;
       if inexact is not null then
         raise exception 'enqueue_event: metadata of key % holds the number %: write it as a string', idempotency_key, inexact
           using errcode = '22023';
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
    `comment on function ??(text, text, text, jsonb) is 'Enqueues a lifecycle event in the caller''s transaction: select ${schema}.enqueue_event(''ana@example.com'', ''matter.closed'', ''matter-1234-closed''). Returns true when enqueued, false when the key is already known (enqueued before, or sent within EVENTS_KEY_RETENTION_DAYS: never sent twice). Raises (SQLSTATE 22023) on an argument that cannot be sent: an email that is not one or is over 320 characters, an event type that is not a dotted name of up to 200, a key of more than 500, metadata that is not a JSON object, is over 16 KiB as text, or holds a number a JSON reader would not carry as written (1e400, 12345678901234567890, 0.1000000000000000000001: write such a value as a string). Sent within milliseconds of the commit (NOTIFY); a rolled-back transaction sends nothing.'`,
    [`${schema}.enqueue_event`],
  );
}

const quoteIdent = (name: string): string => `"${name.replaceAll('"', '""')}"`;
const quoteLiteral = (text: string): string => `'${text.replaceAll("'", "''")}'`;
