import { preparedRaw, type Queryable, type Tables } from '../../db/queryable.js';
import type { SendPolicy } from './sendPolicy.js';

/** An event to enqueue, validated. */
export interface NewEvent {
  readonly key: string;
  readonly email: string | null;
  readonly contactId: string | null;
  readonly eventType: string;
  readonly professionalId: string | null;
  readonly metadata: Record<string, unknown> | null;
  readonly source: 'sql' | 'cli' | 'file' | 'rule';
  /**
   * Another key the same event may have been enqueued under before (a rule's event of a contact
   * known by its email until it gained an external_id): while that key is remembered, this event
   * is not enqueued, so the person is not asked twice for one change.
   */
  readonly sameAs?: string | undefined;
}

/** A claimed event, as the sender needs it. */
export interface ClaimedEvent {
  readonly id: number;
  readonly key: string;
  readonly email: string | null;
  readonly contactId: string | null;
  readonly eventType: string;
  readonly professionalId: string | null;
  /** As JSON.parse reads it: `1e400` is Infinity, `12345678901234567890` rounded (see metadataText). */
  readonly metadata: Record<string, unknown> | null;
  /** The metadata as the row holds it (jsonb as text: every number exactly as stored). */
  readonly metadataText: string | null;
  readonly attempts: number;
  /**
   * Already flagged when claimed: this attempt resends an event whose earlier outcome was unknown
   * (see sendPolicy.decideAfterAttempt: unknown again, it is parked).
   */
  readonly possibleDuplicate: boolean;
  /** This claim of the row among all its claims (see CLAIM_TOKEN): renewals and outcomes name it. */
  readonly claim: string;
  readonly enqueuedAt: Date;
}

/** A claim as renewals and outcome writes name it: the row and which of its claims. */
export interface ClaimRef {
  readonly id: number;
  readonly claim: string;
}

/**
 * What tells one claim of a row from its other claims, from values the row already holds: its
 * attempt count and the time it fell due, as the claim left them. A worker name alone does not:
 * an outcome write retried after its first commit's answer was lost may find the same worker's
 * newer claim of the same event, and must not set it pending while its POST is in flight.
 * Neither value changes while a claim lasts (a claim sets `attempts`; renewals touch neither; a
 * refund is made by the outcome write itself). Between claims, every path that makes a row due
 * again sets `next_attempt_at` from its own transaction's now() (later than the time the claim
 * before fell due), except giving back a claim never sent, which has no outcome to write; attempts
 * alone would not do, as a refund (a refused key) or `events retry` sets them back to an earlier
 * claim's count. Microseconds, exactly as stored.
 */
const CLAIM_TOKEN = `(o.attempts::text || ':' || (extract(epoch from o.next_attempt_at) * 1000000)::bigint::text)`;

/** How an attempt ends for the outbox row (see sendPolicy.decideAfterAttempt). */
export interface RecordedDecision {
  readonly id: number;
  /** The claim the attempt was made under (ClaimedEvent.claim): written only while it holds. */
  readonly claim: string;
  readonly state: 'sent' | 'failed' | 'parked' | 'pending';
  readonly delayMs: number;
  readonly error: string | null;
  readonly possibleDuplicate: boolean;
  readonly refund: boolean;
  readonly platformId: string | null;
  readonly platformStatus: string | null;
}

/**
 * Enqueues the events whose keys were never enqueued (or were forgotten after the key retention),
 * and whose `sameAs` key is not remembered either, the first of a key within `events` winning. A
 * key enters event_keys in the same statement and stays there for as long as it is remembered, so
 * it is the gate: only a key newly inserted there is enqueued (as by enqueue_event), and no prune
 * of its outbox row can let it through again.
 */
export async function enqueueEvents(q: Queryable, db: Tables, events: readonly NewEvent[]): Promise<number> {
  if (events.length === 0) return 0;
  const { rows } = (await q.raw(
    `with input as (
       select * from unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[])
         with ordinality as t(key, email, contact_id, event_type, professional_id, metadata, source, same_as, ord)
     ),
     firsts as (
       select distinct on (key) * from input i
        where i.same_as is null or not exists (select 1 from ?? k where k.idempotency_key = i.same_as)
        order by key, ord
     ),
     -- In key order: concurrent enqueues of overlapping keys queue behind each other, not deadlock.
     fresh as (
       insert into ?? (idempotency_key) select key from firsts order by key
       on conflict (idempotency_key) do nothing
       returning idempotency_key
     )
     insert into ?? (idempotency_key, email, contact_id, event_type, professional_id, metadata, source)
     select f.key, f.email, f.contact_id, f.event_type, f.professional_id, f.metadata::jsonb, f.source
       from firsts f join fresh on fresh.idempotency_key = f.key
      order by f.ord
     on conflict (idempotency_key) do nothing
     returning id`,
    [
      events.map((e) => e.key),
      events.map((e) => e.email) as string[],
      events.map((e) => e.contactId) as string[],
      events.map((e) => e.eventType),
      events.map((e) => e.professionalId) as string[],
      events.map((e) => (e.metadata === null ? null : JSON.stringify(e.metadata))) as string[],
      events.map((e) => e.source),
      events.map((e) => e.sameAs ?? null) as string[],
      db.table('event_keys'),
      db.table('event_keys'),
      db.table('events_outbox'),
    ],
  )) as { rows: unknown[] };
  // Wakes the outbox workers as enqueue_event does (delivered at commit, like the rows).
  if (rows.length > 0) await q.raw('select pg_notify(?, ?)', [`${db.schema}_events_outbox`, '']);
  return rows.length;
}

/**
 * Claims up to `limit` due events for `worker` in one short transaction: rows another worker holds
 * are skipped, not waited for, and the claim lapses at the lease's end if this worker dies.
 */
export async function claimDueEvents(
  q: Queryable,
  db: Tables,
  worker: string,
  limit: number,
  leaseMs: number,
): Promise<ClaimedEvent[]> {
  const { rows } = (await preparedRaw(
    q,
    db,
    `with due as (
       select id from ?? where state = 'pending' and next_attempt_at <= now()
        order by next_attempt_at, id limit ? for update skip locked
     )
     update ?? o
        set state = 'sending', claimed_by = ?, unstarted_claim_of = ?, attempts = o.attempts + 1,
            lease_expires_at = now() + make_interval(secs => ?)
       from due where o.id = due.id
     returning o.id, o.idempotency_key, o.email, o.contact_id, o.event_type, o.professional_id,
               o.metadata::text as metadata, o.attempts, o.possible_duplicate, ${CLAIM_TOKEN} as claim,
               o.enqueued_at`,
    [db.table('events_outbox'), limit, db.table('events_outbox'), worker, worker, leaseMs / 1000],
  )) as {
    rows: Array<{
      id: string | number;
      idempotency_key: string;
      email: string | null;
      contact_id: string | null;
      event_type: string;
      professional_id: string | null;
      // As text, not parsed by the driver: JSON.parse would turn a jsonb 1e400 into Infinity
      // (sent as null) and round 12345678901234567890, and the sender could no longer tell.
      metadata: string | null;
      attempts: number;
      possible_duplicate: boolean;
      claim: string;
      enqueued_at: Date | string;
    }>;
  };
  return rows
    .map((r) => ({
      id: Number(r.id),
      key: r.idempotency_key,
      email: r.email,
      contactId: r.contact_id,
      eventType: r.event_type,
      professionalId: r.professional_id,
      metadata: r.metadata === null ? null : (JSON.parse(r.metadata) as Record<string, unknown>),
      metadataText: r.metadata,
      attempts: r.attempts,
      possibleDuplicate: r.possible_duplicate,
      claim: r.claim,
      enqueuedAt: new Date(r.enqueued_at),
    }))
    .sort((a, b) => a.id - b.id);
}

/**
 * Extends the claims `worker` still holds among `claims` by a lease from now, and returns their
 * ids: one missing was taken back (its lease ran out and another replica released it, or it is
 * another claim of the row by now) and must not be sent by this worker. A conditional write, so a
 * claim is never renewed once another has it.
 * `starting`: their requests are about to start, and from now a lapse of these claims may leave
 * the platform with the event (written before the POST, so a claim never marked was never sent).
 */
export async function renewClaims(
  q: Queryable,
  db: Tables,
  worker: string,
  claims: readonly ClaimRef[],
  leaseMs: number,
  { starting = false }: { starting?: boolean } = {},
): Promise<Set<number>> {
  if (claims.length === 0) return new Set();
  const { rows } = (await preparedRaw(
    q,
    db,
    `update ?? o set lease_expires_at = now() + make_interval(secs => ?),
                     unstarted_claim_of = case when ? then null else o.unstarted_claim_of end
       from unnest(?::bigint[], ?::text[]) as c(id, claim)
      where o.id = c.id and o.state = 'sending' and o.claimed_by = ? and ${CLAIM_TOKEN} = c.claim
      returning o.id`,
    [
      db.table('events_outbox'),
      leaseMs / 1000,
      starting,
      claims.map((c) => c.id),
      claims.map((c) => c.claim),
      worker,
    ],
  )) as { rows: Array<{ id: string | number }> };
  return new Set(rows.map((r) => Number(r.id)));
}

/**
 * How far apart the lapsed claims of one release fall due: longer than a send usually takes, so
 * the one before has been answered (or has killed its worker) before the next is claimed.
 */
const LAPSE_SPACING_SECONDS = 2;

/**
 * Lapses after which an event is taken for one that kills its worker and is failed. Three: the
 * claims one dead worker held fall due apart (LAPSE_SPACING_SECONDS), so an event lapses with a
 * poison one rarely, and three times in a row almost never.
 */
const MAX_LAPSED_CLAIMS = 3;

/** What taking back the lapsed claims did, by the events' next state. */
export interface ReleasedClaims {
  /** Due again, flagged possible duplicates (`retry`). */
  readonly retried: number;
  /** Every attempt used (`retry`): not sent again. */
  readonly failed: number;
  /** Left for an operator (`park`; under `retry`, an event already sent again after an unknown outcome). */
  readonly parked: number;
  /** Never sent (their requests had not started): due again, the attempt not counted. */
  readonly returned: number;
}

/**
 * Claims whose lease ran out: their worker died or hung after claiming. One whose request never
 * started (still `unstarted_claim_of` its worker: only queued behind the ones in flight) is due
 * again as if never claimed: it was not sent, and charging it a lapse would let a replica in a
 * crash loop fail events it never tried. For the others whether the platform received the event
 * is unknown. Under `retry` they are sent again and marked as possible duplicates, as after a lost
 * answer, once: an event already flagged (sent again after an unknown outcome, or after a lapse)
 * whose claim lapses is parked for an operator, as sendPolicy.decideAfterAttempt parks one whose
 * outcome is unknown again, so that the platform holds at most two copies. So a poison event (one
 * that kills every worker that sends it) is parked at its second lapse; it is failed at its first
 * when EVENTS_MAX_ATTEMPTS is 1 (no resend after an unknown outcome, as sendPolicy has it), and at
 * MAX_LAPSED_CLAIMS only if it was never flagged (as an earlier version could leave it). Lapses are
 * counted apart from attempts: one on its last attempt after an outage must not be failed because
 * its replica was killed once. Under `park` they wait for an operator.
 */
export async function releaseExpiredClaims(
  q: Queryable,
  db: Tables,
  policy: Pick<SendPolicy, 'unknownOutcome' | 'maxAttempts'>,
): Promise<ReleasedClaims> {
  const park = policy.unknownOutcome === 'park';
  // EVENTS_MAX_ATTEMPTS says only whether an unknown outcome gets its one resend (1: none), as in
  // sendPolicy.decideAfterAttempt: a budget of 2 must not fail at the second lapse what it parks.
  const lapseLimit = policy.maxAttempts <= 1 ? 1 : MAX_LAPSED_CLAIMS;
  const lapses = `case when lapsed_claims = 0 then '1 time' else (lapsed_claims + 1) || ' times' end`;
  // The events one dead worker was sending fall due one after another, LAPSE_SPACING_SECONDS
  // apart, not together: a poison event is then claimed again on its own, and the events sent
  // beside it (up to EVENTS_CONCURRENCY) are not lapsed with it again and again until they fail
  // too. The row locks are skipped, and the update checks the row again: a
  // replica taking the same claims back at the same moment, or their worker recording its answer
  // just in time, leaves it nothing to change.
  // A claim is unstarted only if it names the worker holding it: an earlier version's replica
  // never writes the mark, and one left by an earlier claim names another worker.
  const { rows } = (await q.raw(
    `with lapsed as (
       select id, claimed_by, coalesce(unstarted_claim_of = claimed_by, false) as unstarted
         from ?? where state = 'sending' and lease_expires_at < now()
        for update skip locked
     ), placed as (
       select id, unstarted,
              row_number() over (partition by claimed_by, unstarted order by id) - 1 as place
         from lapsed
     )
     update ?? o
        set state = case when placed.unstarted then 'pending'
                         when ? then 'parked' when lapsed_claims + 1 >= ? then 'failed'
                         -- Already sent again after an unknown outcome: not a third time.
                         when possible_duplicate then 'parked' else 'pending' end,
            -- Failed too: the platform may have it, and an operator's retry must say so.
            possible_duplicate = possible_duplicate or not (? or placed.unstarted),
            lapsed_claims = lapsed_claims + case when placed.unstarted then 0 else 1 end,
            attempts = attempts - case when placed.unstarted then 1 else 0 end,
            next_attempt_at = case when placed.unstarted then now()
                                   else now() + make_interval(secs => placed.place * ?) end,
            claimed_by = null,
            unstarted_claim_of = null,
            lease_expires_at = null,
            last_error = case when placed.unstarted then last_error
              when not ? and lapsed_claims + 1 >= ?
              then format('its claims lapsed %s with no answer recorded (its worker died, hung or was cut off each time): taken for an event that kills its worker, not sent again',
                          ${lapses})
              when not ? and possible_duplicate
              then format('outcome unknown again after it was sent again following an unknown outcome (the platform may have it twice): the worker that claimed it stopped before recording the answer (its claims lapsed %s); parked for an operator, not sent a third time',
                          ${lapses})
              else format('the worker that claimed it stopped before recording the answer: outcome unknown (its claims lapsed %s)',
                          ${lapses}) end
       from placed
      where o.id = placed.id and o.state = 'sending' and o.lease_expires_at < now()
      returning o.state, placed.unstarted`,
    [
      db.table('events_outbox'),
      db.table('events_outbox'),
      park,
      lapseLimit,
      park,
      LAPSE_SPACING_SECONDS,
      park,
      lapseLimit,
      park,
    ],
  )) as { rows: Array<{ state: 'pending' | 'failed' | 'parked'; unstarted: boolean }> };
  const count = (state: string) => rows.filter((r) => !r.unstarted && r.state === state).length;
  return {
    retried: count('pending'),
    failed: count('failed'),
    parked: count('parked'),
    returned: rows.filter((r) => r.unstarted).length,
  };
}

/** Claims of `worker` that were never sent (a shutdown): back to pending, the attempt not counted. */
export async function returnUnsentClaims(
  q: Queryable,
  db: Tables,
  worker: string,
  ids: readonly number[],
): Promise<void> {
  if (ids.length === 0) return;
  await q(db.table('events_outbox'))
    .whereIn('id', ids)
    .andWhere({ state: 'sending', claimed_by: worker })
    .update({
      state: 'pending',
      attempts: q.raw('greatest(attempts - 1, 0)'),
      claimed_by: null,
      lease_expires_at: null,
    });
}

/**
 * The outcomes of many attempts in one statement, returning the ids written. Only claims this
 * worker still holds are written: a claim that lapsed and was taken back is no longer this
 * worker's to record (and its event may be sent again by another), and an outcome retried after
 * its first commit's answer was lost must not land on a newer claim of the same row (CLAIM_TOKEN).
 */
export async function recordDecisions(
  q: Queryable,
  db: Tables,
  worker: string,
  decisions: readonly RecordedDecision[],
): Promise<Set<number>> {
  if (decisions.length === 0) return new Set();
  const { rows } = (await preparedRaw(
    q,
    db,
    `update ?? as o
        set state = d.state,
            next_attempt_at = case when d.state = 'pending'
                                   then now() + make_interval(secs => d.delay_ms / 1000.0)
                                   else o.next_attempt_at end,
            last_error = d.error,
            possible_duplicate = o.possible_duplicate or d.possible_duplicate,
            attempts = o.attempts - case when d.refund then 1 else 0 end,
            platform_event_id = coalesce(d.platform_id, o.platform_event_id),
            platform_status = coalesce(d.platform_status, o.platform_status),
            sent_at = case when d.state = 'sent' then now() else o.sent_at end,
            claimed_by = null,
            lease_expires_at = null
       from unnest(?::bigint[], ?::text[], ?::text[], ?::bigint[], ?::text[], ?::boolean[], ?::boolean[], ?::text[], ?::text[])
         as d(id, claim, state, delay_ms, error, possible_duplicate, refund, platform_id, platform_status)
      where o.id = d.id and o.state = 'sending' and o.claimed_by = ? and ${CLAIM_TOKEN} = d.claim
      returning o.id`,
    [
      db.table('events_outbox'),
      decisions.map((d) => d.id),
      decisions.map((d) => d.claim),
      decisions.map((d) => d.state),
      decisions.map((d) => Math.round(d.delayMs)),
      decisions.map((d) => d.error) as string[],
      decisions.map((d) => d.possibleDuplicate),
      decisions.map((d) => d.refund),
      decisions.map((d) => d.platformId) as string[],
      decisions.map((d) => d.platformStatus) as string[],
      worker,
    ],
  )) as { rows: Array<{ id: string | number }> };
  return new Set(rows.map((r) => Number(r.id)));
}

export interface OutboxRow {
  idempotency_key: string;
  state: string;
  event_type: string;
  email: string | null;
  contact_id: string | null;
  attempts: number;
  possible_duplicate: boolean;
  last_error: string | null;
  enqueued_at: string;
  sent_at: string | null;
}

export async function listEvents(
  q: Queryable,
  db: Tables,
  filter: { state?: string | undefined; limit: number },
): Promise<OutboxRow[]> {
  const query = q(db.table('events_outbox'))
    .select(
      'idempotency_key',
      'state',
      'event_type',
      'email',
      'contact_id',
      'attempts',
      'possible_duplicate',
      'last_error',
      'enqueued_at',
      'sent_at',
    )
    .orderBy('id', 'desc')
    .limit(filter.limit);
  if (filter.state !== undefined) query.where({ state: filter.state });
  const rows: Array<OutboxRow & { enqueued_at: Date | string; sent_at: Date | string | null }> = await query;
  return rows.map((r) => ({
    ...r,
    enqueued_at: new Date(r.enqueued_at).toISOString(),
    sent_at: r.sent_at === null ? null : new Date(r.sent_at).toISOString(),
  }));
}

/** The states an operator's decision applies to: `discard` leaves a failed event as it is. */
const RESOLVABLE = { retry: ['parked', 'failed', 'pending'], discard: ['parked', 'pending'] } as const;

/**
 * An operator's decision on a parked or failed event: send it (again), or never. One conditional
 * write, so an event a replica claims meanwhile (`sending`) is left alone. A retried event starts
 * with a full budget: its attempts and lapsed claims are reset. Either way its possible_duplicate
 * flag is kept, and set on a parked one: only an unknown outcome parks an event, so the platform
 * may have it already (under `park` the flag was not set yet). Retried, the send now asked for may
 * make a second copy (and an unknown outcome of that send parks it again instead of sending a
 * third); discarded, it is `failed` like an event the platform refused, and only the flag still
 * says so when it is retried later. Returns the event's state afterwards: the new one, else the
 * one that stopped the change (undefined: no such key).
 */
export async function resolveEvent(
  q: Queryable,
  db: Tables,
  key: string,
  action: 'retry' | 'discard',
): Promise<string | undefined> {
  const possibleDuplicate = q.raw("possible_duplicate or state = 'parked'");
  const changed: Array<{ state: string }> = await q(db.table('events_outbox'))
    .where({ idempotency_key: key })
    .whereIn('state', RESOLVABLE[action])
    .update(
      action === 'retry'
        ? {
            state: 'pending',
            next_attempt_at: q.fn.now(),
            last_error: null,
            attempts: 0,
            lapsed_claims: 0,
            possible_duplicate: possibleDuplicate,
          }
        : {
            state: 'failed',
            // A parked event's reason is why the platform may have it: kept for `events list`.
            last_error: q.raw(
              "case when state = 'parked' then 'discarded by an operator; it was parked: ' || coalesce(last_error, '') else 'discarded by an operator' end",
            ),
            possible_duplicate: possibleDuplicate,
          },
      ['state'],
    );
  if (changed.length > 0) return changed[0]!.state;
  // A statement of its own: it sees the state that the write above waited for and found.
  const row: { state: string } | undefined = await q(db.table('events_outbox'))
    .where({ idempotency_key: key })
    .first('state');
  return row?.state;
}

/**
 * Most rows one statement of the prune deletes: however many are due (a first prune after the
 * retention was lowered, or after prunes failed for a while), each statement stays short, well
 * within a statement_timeout, and holds its row locks and WAL for one batch only.
 */
export const PRUNE_BATCH = 10_000;

/**
 * Housekeeping: sent rows older than the retention leave the outbox (a queue table bloats
 * otherwise). Their keys stay in event_keys, which has held them since they were enqueued, now
 * with the time they were sent, and are forgotten once that is older than the key retention.
 * Both deletes go in batches of `batch` rows, each its own statement (a row's delete and its
 * key's sent_at commit together), until a batch finds fewer. `signal`: stops between batches,
 * returning what was done (the rest waits for the next prune).
 */
export async function pruneOutbox(
  q: Queryable,
  db: Tables,
  retentionDays: number,
  keyRetentionDays: number,
  { batch = PRUNE_BATCH, signal }: { batch?: number; signal?: AbortSignal | undefined } = {},
): Promise<{ pruned: number; keysForgotten: number }> {
  const result = { pruned: 0, keysForgotten: 0 };
  // An upsert, not an update: a row enqueued by a replica older than migration 014 has no key yet.
  // The ids by the index of sent rows, `= any(array(…))` so the delete goes by the primary key;
  // the delete checks each row again (a row locked meanwhile is waited for, then deleted).
  for (;;) {
    const { rows } = (await q.raw(
      `with gone as (
         delete from ?? o
          where o.id = any(array(
                  select id from ?? where state = 'sent' and sent_at < now() - make_interval(days => ?)
                   order by sent_at limit ?))
            and o.state = 'sent' and o.sent_at < now() - make_interval(days => ?)
         returning o.idempotency_key, o.sent_at
       )
       insert into ?? (idempotency_key, sent_at) select idempotency_key, sent_at from gone
       on conflict (idempotency_key) do update set sent_at = excluded.sent_at
       returning idempotency_key`,
      [
        db.table('events_outbox'),
        db.table('events_outbox'),
        retentionDays,
        batch,
        retentionDays,
        db.table('event_keys'),
      ],
    )) as { rows: unknown[] };
    result.pruned += rows.length;
    if (signal?.aborted) return result;
    if (rows.length < batch) break;
  }
  // A count from the statement itself: the embedded driver does not report affected rows. Only
  // keys whose rows were pruned have a sent_at: one still in the outbox is never forgotten.
  for (;;) {
    const forgotten = (await q.raw(
      `with gone as (
         delete from ?? k
          where k.idempotency_key = any(array(
                  select idempotency_key from ?? where sent_at < now() - make_interval(days => ?) limit ?))
            and k.sent_at < now() - make_interval(days => ?)
         returning 1
       )
       select count(*)::int as n from gone`,
      [db.table('event_keys'), db.table('event_keys'), keyRetentionDays, batch, keyRetentionDays],
    )) as { rows: Array<{ n: number }> };
    const n = Number(forgotten.rows[0]?.n ?? 0);
    result.keysForgotten += n;
    if (n < batch || signal?.aborted) break;
  }
  return result;
}

export interface OutboxStats {
  byState: Record<string, number>;
  /** Pending or being sent. */
  backlog: number;
  /** Age of the oldest pending event, seconds; 0 when none. */
  oldestPendingSeconds: number;
  possibleDuplicates: number;
}

/**
 * What the backlog gauges need, read every poll: only the rows still to send, through the partial
 * indexes on pending and sending rows, so the sent rows kept for the retention are never scanned.
 */
export async function readOutboxBacklog(
  q: Queryable,
  db: Tables,
): Promise<Pick<OutboxStats, 'backlog' | 'oldestPendingSeconds'>> {
  const row: { backlog: string | number; oldest: string | number | null } | undefined = await q(
    db.table('events_outbox'),
  )
    .whereIn('state', ['pending', 'sending'])
    .first(
      q.raw('count(*) as backlog'),
      q.raw("extract(epoch from now() - min(enqueued_at) filter (where state = 'pending')) as oldest"),
    );
  return {
    backlog: Number(row?.backlog ?? 0),
    oldestPendingSeconds: row?.oldest == null ? 0 : Math.max(0, Number(row.oldest)),
  };
}

/** Every state's count, for `status` and the CLI: reads the whole table. */
export async function readOutboxStats(q: Queryable, db: Tables): Promise<OutboxStats> {
  const rows: Array<{
    state: string;
    n: string | number;
    oldest: string | number | null;
    dups: string | number;
  }> = await q(db.table('events_outbox'))
    .select(
      'state',
      q.raw('count(*) as n'),
      q.raw('extract(epoch from now() - min(enqueued_at)) as oldest'),
      q.raw('count(*) filter (where possible_duplicate) as dups'),
    )
    .groupBy('state');
  const byState = Object.fromEntries(rows.map((r) => [r.state, Number(r.n)]));
  const pending = rows.find((r) => r.state === 'pending');
  return {
    byState,
    backlog: (byState.pending ?? 0) + (byState.sending ?? 0),
    oldestPendingSeconds: pending?.oldest == null ? 0 : Math.max(0, Number(pending.oldest)),
    possibleDuplicates: rows.reduce((a, r) => a + Number(r.dups), 0),
  };
}
