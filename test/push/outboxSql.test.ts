import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { toNewEvent } from '../../src/push/events/eventInput.js';
import { jsonTextBytes, METADATA_MAX_BYTES } from '../../src/push/events/metadataSize.js';
import {
  type ClaimedEvent,
  type ClaimRef,
  claimDueEvents,
  enqueueEvents,
  pruneOutbox,
  readOutboxBacklog,
  readOutboxStats,
  recordDecisions,
  releaseExpiredClaims,
  renewClaims,
  resolveEvent,
} from '../../src/push/events/outboxSql.js';
import { freshDb } from '../helpers/db.js';
import { newEvent } from './helpers.js';

/** The outbox's SQL on a real database (the server in CI, embedded otherwise). */
describe('outbox SQL', () => {
  let db: Db;
  beforeAll(async () => {
    db = await freshDb();
  });
  afterAll(async () => {
    await db?.close();
  });
  const outbox = () => db.knex(db.table('events_outbox'));
  const RETRY = { unknownOutcome: 'retry', maxAttempts: 10 } as const;
  /** Marks `ids` as sent by `worker` (their requests started): a lapse may leave them sent. */
  const startSending = (worker: string, claims: readonly ClaimRef[]) =>
    renewClaims(db.knex, db, worker, claims, 1, { starting: true });
  /** An outcome of `claim`, pending again at once (`refund`: the attempt given back, as after a 401). */
  const pendingAgain = (claim: ClaimRef, refund = false) => ({
    id: claim.id,
    claim: claim.claim,
    state: 'pending' as const,
    delayMs: 0,
    error: 'x',
    possibleDuplicate: false,
    refund,
    platformId: null,
    platformStatus: null,
  });
  /** The claims of the first test, kept for the tests after it. */
  let firstClaims: ClaimedEvent[] = [];
  /** A worker that claims the due events, starts sending them and dies: its claims lapse at once. */
  const claimAndDie = async () => {
    const claimed = await claimDueEvents(db.knex, db, 'doomed-worker', 10, 1);
    await startSending('doomed-worker', claimed);
    await sleep(5);
    return claimed;
  };

  it('claims disjoint rows for two workers, each claim leased and counted as an attempt', async () => {
    expect(
      await enqueueEvents(
        db.knex,
        db,
        ['c1', 'c2', 'c3'].map((k) => newEvent(k)),
      ),
    ).toBe(3);
    expect(await enqueueEvents(db.knex, db, [newEvent('c1')])).toBe(0);
    const a = await claimDueEvents(db.knex, db, 'worker-a', 2, 60_000);
    const b = await claimDueEvents(db.knex, db, 'worker-b', 2, 60_000);
    firstClaims = [...a, ...b];
    expect(a.map((e) => e.key)).toEqual(['c1', 'c2']);
    expect(b.map((e) => e.key)).toEqual(['c3']);
    expect(a[0]!.attempts).toBe(1);
    expect(await claimDueEvents(db.knex, db, 'worker-c', 5, 60_000)).toEqual([]);
    // An outcome is written only by the worker holding the claim.
    expect(
      await recordDecisions(db.knex, db, 'worker-b', [
        {
          id: a[0]!.id,
          claim: a[0]!.claim,
          state: 'sent',
          delayMs: 0,
          error: null,
          possibleDuplicate: false,
          refund: false,
          platformId: 'x',
          platformStatus: 'queued',
        },
      ]),
    ).toEqual(new Set());
    const written = await recordDecisions(db.knex, db, 'worker-a', [
      {
        id: a[0]!.id,
        claim: a[0]!.claim,
        state: 'sent',
        delayMs: 0,
        error: null,
        possibleDuplicate: false,
        refund: false,
        platformId: 'p1',
        platformStatus: 'queued',
      },
      {
        id: a[1]!.id,
        claim: a[1]!.claim,
        state: 'pending',
        delayMs: 60_000,
        error: '500',
        possibleDuplicate: false,
        refund: false,
        platformId: null,
        platformStatus: null,
      },
    ]);
    expect(written).toEqual(new Set([a[0]!.id, a[1]!.id]));
    expect(await outbox().where({ idempotency_key: 'c1' }).first()).toMatchObject({
      state: 'sent',
      platform_event_id: 'p1',
    });
    const c2 = await outbox().where({ idempotency_key: 'c2' }).first();
    expect(c2).toMatchObject({ state: 'pending', last_error: '500', claimed_by: null });
    expect(new Date(c2.next_attempt_at).getTime()).toBeGreaterThan(Date.now() + 30_000);
  });

  it('renews only the claims the worker still holds', async () => {
    const before = await outbox().where({ idempotency_key: 'c3' }).first('lease_expires_at');
    const [c1, , c3] = firstClaims;
    expect(await renewClaims(db.knex, db, 'worker-a', [c3!], 120_000)).toEqual(new Set());
    expect(await renewClaims(db.knex, db, 'worker-b', [c3!, c1!], 120_000)).toEqual(new Set([c3!.id]));
    const after = await outbox().where({ idempotency_key: 'c3' }).first('lease_expires_at');
    expect(new Date(after.lease_expires_at).getTime()).toBeGreaterThan(
      new Date(before.lease_expires_at).getTime(),
    );
  });

  it('takes back the claims of a dead worker as unknown outcomes: sent again and flagged, or parked', async () => {
    await startSending('worker-b', [firstClaims[2]!]);
    await outbox()
      .where({ idempotency_key: 'c3' })
      .update({ lease_expires_at: db.knex.raw("now() - interval '1 second'") });
    expect(await releaseExpiredClaims(db.knex, db, RETRY)).toEqual({
      retried: 1,
      failed: 0,
      parked: 0,
      returned: 0,
    });
    expect(await outbox().where({ idempotency_key: 'c3' }).first()).toMatchObject({
      state: 'pending',
      possible_duplicate: true,
    });
    await enqueueEvents(db.knex, db, [newEvent('p1')]);
    const [p1] = (await claimDueEvents(db.knex, db, 'worker-d', 10, 60_000)).filter((e) => e.key === 'p1');
    await startSending('worker-d', [p1!]);
    await outbox()
      .where({ idempotency_key: 'p1' })
      .update({ lease_expires_at: db.knex.raw("now() - interval '1 second'") });
    expect(await releaseExpiredClaims(db.knex, db, { ...RETRY, unknownOutcome: 'park' })).toEqual({
      retried: 0,
      failed: 0,
      parked: 1,
      returned: 0,
    });
    expect(await outbox().where({ idempotency_key: 'p1' }).first()).toMatchObject({ state: 'parked' });
  });

  it('parks an event whose claim lapses once it was sent again flagged (a poison event at its second lapse): at most two copies', async () => {
    await enqueueEvents(db.knex, db, [newEvent('poison')]);
    // A first attempt answered (a 503), counted when it was claimed.
    const [first] = await claimDueEvents(db.knex, db, 'worker-e', 1, 60_000);
    await recordDecisions(db.knex, db, 'worker-e', [
      {
        id: first!.id,
        claim: first!.claim,
        state: 'pending',
        delayMs: 0,
        error: '503',
        possibleDuplicate: false,
        refund: false,
        platformId: null,
        platformStatus: null,
      },
    ]);
    const poison = () => outbox().where({ idempotency_key: 'poison' }).first();
    // Then it kills every worker that claims it: sent again once, flagged...
    expect((await claimAndDie()).map((e) => [e.key, e.attempts, e.possibleDuplicate])).toEqual([
      ['poison', 2, false],
    ]);
    expect(await releaseExpiredClaims(db.knex, db, RETRY)).toEqual({
      retried: 1,
      failed: 0,
      parked: 0,
      returned: 0,
    });
    expect(await poison()).toMatchObject({
      state: 'pending',
      attempts: 2,
      lapsed_claims: 1,
      possible_duplicate: true,
    });
    expect((await poison()).last_error).toBe(
      'the worker that claimed it stopped before recording the answer: outcome unknown (its claims lapsed 1 time)',
    );
    // ...and its second copy's outcome is unknown too: not sent a third time.
    expect((await claimAndDie()).map((e) => [e.attempts, e.possibleDuplicate])).toEqual([[3, true]]);
    expect(await releaseExpiredClaims(db.knex, db, RETRY)).toEqual({
      retried: 0,
      failed: 0,
      parked: 1,
      returned: 0,
    });
    expect(await poison()).toMatchObject({
      state: 'parked',
      attempts: 3,
      lapsed_claims: 2,
      claimed_by: null,
      possible_duplicate: true,
    });
    expect((await poison()).last_error).toBe(
      'outcome unknown again after it was sent again following an unknown outcome (the platform may have it twice): the worker that claimed it stopped before recording the answer (its claims lapsed 2 times); parked for an operator, not sent a third time',
    );
    expect(await claimAndDie()).toEqual([]);
    await outbox().where({ idempotency_key: 'poison' }).del();
  });

  it('parks an event sent again after an unknown answer whose claim then lapses', async () => {
    await enqueueEvents(db.knex, db, [newEvent('lost-then-lapsed')]);
    const [first] = await claimDueEvents(db.knex, db, 'worker-g', 1, 60_000);
    // A timeout: sent again, flagged (as sendPolicy decides).
    await recordDecisions(db.knex, db, 'worker-g', [
      { ...pendingAgain(first!), error: 'POST /events timed out', possibleDuplicate: true },
    ]);
    expect((await claimAndDie()).map((e) => [e.key, e.possibleDuplicate])).toEqual([
      ['lost-then-lapsed', true],
    ]);
    expect(await releaseExpiredClaims(db.knex, db, RETRY)).toMatchObject({ retried: 0, parked: 1 });
    expect(await outbox().where({ idempotency_key: 'lost-then-lapsed' }).first()).toMatchObject({
      state: 'parked',
      attempts: 2,
      lapsed_claims: 1,
      possible_duplicate: true,
    });
    await outbox().where({ idempotency_key: 'lost-then-lapsed' }).del();
  });

  it('fails an event whose claims lapsed three times, if it was never flagged (as an earlier version left it)', async () => {
    await enqueueEvents(db.knex, db, [newEvent('old-lapses')]);
    await outbox().where({ idempotency_key: 'old-lapses' }).update({ lapsed_claims: 2 });
    await claimAndDie();
    expect(await releaseExpiredClaims(db.knex, db, RETRY)).toMatchObject({ failed: 1, parked: 0 });
    expect(await outbox().where({ idempotency_key: 'old-lapses' }).first()).toMatchObject({
      state: 'failed',
      lapsed_claims: 3,
      possible_duplicate: true,
    });
    expect((await outbox().where({ idempotency_key: 'old-lapses' }).first()).last_error).toBe(
      'its claims lapsed 3 times with no answer recorded (its worker died, hung or was cut off each time): taken for an event that kills its worker, not sent again',
    );
    await outbox().where({ idempotency_key: 'old-lapses' }).del();
  });

  it('sends again, flagged, an event on its last attempt whose claim lapsed once (its worker was killed)', async () => {
    const policy = { unknownOutcome: 'retry', maxAttempts: 3 } as const;
    await enqueueEvents(db.knex, db, [newEvent('last-try')]);
    // Two attempts used by an outage, then its third claim dies with the replica, unsent.
    await outbox().where({ idempotency_key: 'last-try' }).update({ attempts: 2 });
    expect((await claimAndDie()).map((e) => e.attempts)).toEqual([3]);
    expect(await releaseExpiredClaims(db.knex, db, policy)).toEqual({
      retried: 1,
      failed: 0,
      parked: 0,
      returned: 0,
    });
    expect(await outbox().where({ idempotency_key: 'last-try' }).first()).toMatchObject({
      state: 'pending',
      lapsed_claims: 1,
      possible_duplicate: true,
    });
    await outbox().where({ idempotency_key: 'last-try' }).del();
  });

  it('parks, not fails, a flagged event at its second lapse with EVENTS_MAX_ATTEMPTS=2, as with any budget over 1', async () => {
    const policy = { unknownOutcome: 'retry', maxAttempts: 2 } as const;
    await enqueueEvents(db.knex, db, [newEvent('two-tries')]);
    await claimAndDie();
    expect(await releaseExpiredClaims(db.knex, db, policy)).toMatchObject({ retried: 1, failed: 0 });
    await claimAndDie();
    expect(await releaseExpiredClaims(db.knex, db, policy)).toMatchObject({ failed: 0, parked: 1 });
    expect(await outbox().where({ idempotency_key: 'two-tries' }).first()).toMatchObject({
      state: 'parked',
      lapsed_claims: 2,
      possible_duplicate: true,
    });
    await outbox().where({ idempotency_key: 'two-tries' }).del();
  });

  it('fails an event at its first lapse with EVENTS_MAX_ATTEMPTS=1: no resend after an unknown outcome', async () => {
    await enqueueEvents(db.knex, db, [newEvent('one-try')]);
    await claimAndDie();
    expect(await releaseExpiredClaims(db.knex, db, { unknownOutcome: 'retry', maxAttempts: 1 })).toEqual({
      retried: 0,
      failed: 1,
      parked: 0,
      returned: 0,
    });
    await outbox().where({ idempotency_key: 'one-try' }).del();
  });

  it("spaces a dead worker's lapsed claims, so the next claim takes one of them, not all", async () => {
    const keys = ['queued-1', 'queued-2', 'queued-3'];
    await enqueueEvents(
      db.knex,
      db,
      keys.map((k) => newEvent(k)),
    );
    expect((await claimAndDie()).map((e) => e.key)).toEqual(keys);
    expect(await releaseExpiredClaims(db.knex, db, RETRY)).toEqual({
      retried: 3,
      failed: 0,
      parked: 0,
      returned: 0,
    });
    const { rows } = (await db.knex.raw(
      `select idempotency_key, extract(epoch from next_attempt_at - now())::float8 as due_in
         from ?? where idempotency_key = any(?) order by id`,
      [db.table('events_outbox'), keys],
    )) as { rows: Array<{ idempotency_key: string; due_in: number }> };
    expect(rows.map((r) => Math.max(0, Math.round(r.due_in)))).toEqual([0, 2, 4]);
    // The next claim finds one of them due, not the three that fell together.
    expect((await claimDueEvents(db.knex, db, 'worker-f', 10, 60_000)).map((e) => e.key)).toEqual([
      'queued-1',
    ]);
    await outbox().whereIn('idempotency_key', keys).del();
  });

  it('returns the claims of a crash-looping replica that never started their requests: none failed, none flagged', async () => {
    const keys = ['innocent-1', 'innocent-2', 'innocent-3'];
    await enqueueEvents(
      db.knex,
      db,
      keys.map((k) => newEvent(k)),
    );
    // Each life claims what is due, as a drain does, and is killed before any request starts.
    for (let life = 0; life < 3; life++) {
      expect((await claimDueEvents(db.knex, db, `looping-${life}`, 10, 1)).map((e) => e.key)).toEqual(keys);
      await sleep(5);
      expect(await releaseExpiredClaims(db.knex, db, RETRY)).toEqual({
        retried: 0,
        failed: 0,
        parked: 0,
        returned: 3,
      });
    }
    expect(
      await outbox()
        .whereIn('idempotency_key', keys)
        .orderBy('id')
        .select('state', 'attempts', 'lapsed_claims', 'possible_duplicate', 'last_error'),
    ).toEqual(
      keys.map(() => ({
        state: 'pending',
        attempts: 0,
        lapsed_claims: 0,
        possible_duplicate: false,
        last_error: null,
      })),
    );
    await outbox().whereIn('idempotency_key', keys).del();
  });

  it('charges a lapse only to the claim whose request started, and to a claim of an earlier version', async () => {
    const keys = ['in-flight', 'queued', 'old-version'];
    await enqueueEvents(
      db.knex,
      db,
      keys.map((k) => newEvent(k)),
    );
    const claimed = await claimDueEvents(db.knex, db, 'half-way', 10, 1);
    await startSending('half-way', [claimed[0]!]);
    // A replica of the version before 018 claims without naming itself as not started (a name
    // left by an earlier claim is another worker's).
    await outbox()
      .where({ idempotency_key: 'old-version' })
      .update({ claimed_by: 'old', unstarted_claim_of: 'x' });
    await sleep(5);
    expect(await releaseExpiredClaims(db.knex, db, { ...RETRY, unknownOutcome: 'park' })).toEqual({
      retried: 0,
      failed: 0,
      parked: 2,
      returned: 1,
    });
    expect(
      await outbox()
        .whereIn('idempotency_key', keys)
        .orderBy('id')
        .select('state', 'attempts', 'lapsed_claims'),
    ).toEqual([
      { state: 'parked', attempts: 1, lapsed_claims: 1 },
      { state: 'pending', attempts: 0, lapsed_claims: 0 },
      { state: 'parked', attempts: 1, lapsed_claims: 1 },
    ]);
    await outbox().whereIn('idempotency_key', keys).del();
  });

  it('parks a lapsed claim under park whatever its attempts, as before', async () => {
    await enqueueEvents(db.knex, db, [newEvent('poison-park')]);
    await outbox().where({ idempotency_key: 'poison-park' }).update({ attempts: 5 });
    await claimAndDie();
    expect(await releaseExpiredClaims(db.knex, db, { unknownOutcome: 'park', maxAttempts: 3 })).toEqual({
      retried: 0,
      failed: 0,
      parked: 1,
      returned: 0,
    });
    expect(await outbox().where({ idempotency_key: 'poison-park' }).first()).toMatchObject({
      state: 'parked',
      attempts: 6,
      lapsed_claims: 1,
      possible_duplicate: false,
    });
    await outbox().where({ idempotency_key: 'poison-park' }).del();
  });

  it("fences outcomes and renewals by the claim: an older claim's write lands on no newer claim of the same worker", async () => {
    await enqueueEvents(db.knex, db, [newEvent('fence-1')]);
    const row = () =>
      outbox().where({ idempotency_key: 'fence-1' }).first('state', 'claimed_by', 'attempts', 'last_error');
    const worker = 'fence-worker';
    const [first] = await claimDueEvents(db.knex, db, worker, 1, 60_000);
    // The key was refused: the attempt is given back, in the outcome write itself.
    expect(await recordDecisions(db.knex, db, worker, [pendingAgain(first!, true)])).toEqual(
      new Set([first!.id]),
    );
    const [second] = await claimDueEvents(db.knex, db, worker, 1, 60_000);
    // The same worker, the same attempt count: only the claim tells them apart.
    expect(second!.attempts).toBe(first!.attempts);
    expect(second!.claim).not.toBe(first!.claim);
    // The first claim's write again (its first commit's answer was lost), while the second
    // claim's POST is in flight: it changes nothing, and the first claim renews nothing.
    expect(await recordDecisions(db.knex, db, worker, [pendingAgain(first!, true)])).toEqual(new Set());
    expect(await startSending(worker, [first!])).toEqual(new Set());
    expect(await row()).toMatchObject({ state: 'sending', claimed_by: worker, attempts: 1 });
    expect(await startSending(worker, [second!])).toEqual(new Set([second!.id]));
    // Counted this time: the next claim has another attempt count, and the same fence holds.
    expect(await recordDecisions(db.knex, db, worker, [pendingAgain(second!)])).toEqual(
      new Set([second!.id]),
    );
    const [third] = await claimDueEvents(db.knex, db, worker, 1, 60_000);
    expect(third!.attempts).toBe(2);
    expect(await recordDecisions(db.knex, db, worker, [pendingAgain(second!)])).toEqual(new Set());
    expect(await recordDecisions(db.knex, db, worker, [pendingAgain(first!, true)])).toEqual(new Set());
    expect(await row()).toMatchObject({ state: 'sending', claimed_by: worker, attempts: 2 });
    expect(
      await recordDecisions(db.knex, db, worker, [
        { ...pendingAgain(third!), state: 'sent', platformId: 'p-fence', platformStatus: 'queued' },
      ]),
    ).toEqual(new Set([third!.id]));
    expect(await row()).toMatchObject({ state: 'sent', claimed_by: null, attempts: 2 });
    await outbox().where({ idempotency_key: 'fence-1' }).del();
  });

  it('a claim says whether the event was already flagged a possible duplicate', async () => {
    await enqueueEvents(db.knex, db, [newEvent('flag-1'), newEvent('flag-2')]);
    await outbox().where({ idempotency_key: 'flag-2' }).update({ possible_duplicate: true });
    const claimed = await claimDueEvents(db.knex, db, 'flag-worker', 10, 60_000);
    expect(claimed.map((e) => [e.key, e.possibleDuplicate])).toEqual([
      ['flag-1', false],
      ['flag-2', true],
    ]);
    await outbox().whereIn('idempotency_key', ['flag-1', 'flag-2']).del();
  });

  it("an operator's retry gives the event a full budget: attempts and lapses reset, the flag kept", async () => {
    await enqueueEvents(db.knex, db, [newEvent('again-1')]);
    await outbox()
      .where({ idempotency_key: 'again-1' })
      .update({ state: 'failed', attempts: 10, lapsed_claims: 2, possible_duplicate: true, last_error: 'x' });
    expect(await resolveEvent(db.knex, db, 'again-1', 'retry')).toBe('pending');
    expect(
      await outbox()
        .where({ idempotency_key: 'again-1' })
        .first('state', 'attempts', 'lapsed_claims', 'possible_duplicate', 'last_error'),
    ).toEqual({
      state: 'pending',
      attempts: 0,
      lapsed_claims: 0,
      possible_duplicate: true,
      last_error: null,
    });
    await outbox().where({ idempotency_key: 'again-1' }).del();
  });

  const enqueueViaSql = (email: string, type: string, key: string, metadata: unknown) =>
    db.knex.raw('select ??(?, ?, ?, ?::jsonb) as enqueued', [
      `${db.schema}.enqueue_event`,
      email,
      type,
      key,
      metadata === undefined ? null : JSON.stringify(metadata),
    ]);
  /** Metadata of exactly `bytes` bytes as jsonb text: `{"pad": "xx…"}` is 11 bytes and the x's. */
  const metadataOf = (bytes: number) => ({ pad: 'x'.repeat(bytes - 11) });

  it('enqueue_event refuses metadata over 16 KiB, naming the key and the size, and enqueues it up to the bound', async () => {
    expect(jsonTextBytes(metadataOf(METADATA_MAX_BYTES))).toBe(16_384);
    const over = enqueueViaSql('big@example.com', 'matter.closed', 'big-1', metadataOf(5_000_000));
    await expect(over).rejects.toThrow(
      'enqueue_event: metadata of key big-1 is 5000000 bytes of JSON, more than 16384 (16 KiB)',
    );
    await expect(
      enqueueViaSql('big@example.com', 'matter.closed', 'big-2', metadataOf(METADATA_MAX_BYTES + 1)),
    ).rejects.toThrow('metadata of key big-2 is 16385 bytes of JSON');
    expect(
      (await enqueueViaSql('big@example.com', 'matter.closed', 'big-3', metadataOf(METADATA_MAX_BYTES)))
        .rows[0].enqueued,
    ).toBe(true);
    // Nothing of a refused call stays behind: its key may be enqueued with smaller metadata.
    expect(
      (await enqueueViaSql('big@example.com', 'matter.closed', 'big-1', { id: 1 })).rows[0].enqueued,
    ).toBe(true);
    expect(
      await outbox().whereIn('idempotency_key', ['big-1', 'big-2', 'big-3']).pluck('idempotency_key'),
    ).toEqual(expect.arrayContaining(['big-1', 'big-3']));
    expect(await outbox().where({ idempotency_key: 'big-2' }).first()).toBeUndefined();
    await outbox().whereIn('idempotency_key', ['big-1', 'big-3']).del();
  });

  it('enqueue_event refuses an over-long email or event type by its length, without echoing the value', async () => {
    const long = `${'a'.repeat(1_000_000)}@example.com`;
    const error = await enqueueViaSql(long, 'matter.closed', 'long-1', undefined).catch((e: Error) => e);
    expect(String(error)).toContain('enqueue_event: email must be at most 320 characters, got 1000012');
    expect(String(error).length).toBeLessThan(1_000);
    const type = await enqueueViaSql('ana@example.com', 'a'.repeat(300), 'long-2', undefined).catch(
      (e: Error) => e,
    );
    expect(String(type)).toContain('enqueue_event: event_type must be at most 200 characters, got 300');
    // The other answers are as before.
    await expect(enqueueViaSql('ana@example', 'matter.closed', 'long-3', undefined)).rejects.toThrow(
      'enqueue_event: email must be an email address, got ana@example',
    );
  });

  // zod's max() counts code points, as PostgreSQL's length() does; this pins that agreement.
  it('files and the CLI count a key in characters, as enqueue_event does, not in UTF-16 units', async () => {
    const fields = (key: string) => ({ key, email: 'ana@example.com', event_type: 'matter.closed' });
    // 500 characters, 1,000 UTF-16 units: taken by both.
    const emoji = '🎉'.repeat(500);
    expect(toNewEvent(fields(emoji), 'file')).toHaveProperty('key', emoji);
    expect((await enqueueViaSql('ana@example.com', 'matter.closed', emoji, undefined)).rows[0].enqueued).toBe(
      true,
    );
    // One character more: refused by both.
    const over = `${emoji}x`;
    expect(toNewEvent(fields(over), 'file')).toEqual({
      field: 'key',
      reason: 'must be at most 500 characters',
    });
    await expect(enqueueViaSql('ana@example.com', 'matter.closed', over, undefined)).rejects.toThrow(
      'enqueue_event: idempotency_key must be 1 to 500 characters',
    );
    expect(toNewEvent({ ...fields('k'), contact_id: '🎉'.repeat(200) }, 'file')).toHaveProperty('key', 'k');
    expect(toNewEvent({ ...fields('k'), contact_id: '🎉'.repeat(201) }, 'file')).toEqual({
      field: 'contact_id',
      reason: 'must be at most 200 characters',
    });
  });

  it('files and the CLI refuse metadata by the same size as enqueue_event, byte for byte', async () => {
    const samples: unknown[] = [
      {},
      { a: [] },
      { id: 1234, name: 'Ana Løvås 🎉', tags: ['a', 'b', { c: null, d: true, e: false }] },
      { text: 'line\nbreak\ttab "quoted" back\\slash \u0001 \u001f \u007f \u2028 / <>' },
      { big: 1e21, bigger: 1.2345e25, negative: -2.5e30, small: 1e-7, smaller: 1.5e-7, tiny: -2.5e-9 },
      {
        plain: 123.456,
        zero: 0,
        minus: -0,
        fraction: 0.1 + 0.2,
        max: Number.MAX_SAFE_INTEGER,
        huge: 1.7976931348623157e308,
      },
      { nested: { deeper: { deepest: [[1, 2], [], [{}]] } } },
    ];
    for (const sample of samples) {
      const { rows } = await db.knex.raw('select octet_length(?::jsonb::text) as n', [
        JSON.stringify(sample),
      ]);
      expect(jsonTextBytes(sample), JSON.stringify(sample)).toBe(Number(rows[0].n));
    }
    const fields = (metadata: unknown) => ({
      key: 'k',
      email: 'ana@example.com',
      event_type: 'matter.closed',
      metadata,
    });
    expect(toNewEvent(fields(JSON.stringify(metadataOf(METADATA_MAX_BYTES))), 'file')).toHaveProperty(
      'key',
      'k',
    );
    expect(toNewEvent(fields(JSON.stringify(metadataOf(METADATA_MAX_BYTES + 1))), 'file')).toEqual({
      field: 'metadata',
      reason:
        'is 16385 bytes of JSON, more than 16384 (16 KiB): send what the campaign needs (ids, names, a date), not documents',
    });
  });

  it('prunes sent rows after the retention, still refusing their keys until the key retention ends', async () => {
    await outbox()
      .where({ idempotency_key: 'c1' })
      .update({ sent_at: db.knex.raw("now() - interval '8 days'") });
    expect(await pruneOutbox(db.knex, db, 7, 400)).toEqual({ pruned: 1, keysForgotten: 0 });
    expect(await outbox().where({ idempotency_key: 'c1' }).first()).toBeUndefined();
    expect(await enqueueEvents(db.knex, db, [newEvent('c1')])).toBe(0);
    const viaSql = await db.knex.raw('select ??(?, ?, ?) as enqueued', [
      `${db.schema}.enqueue_event`,
      'c1@example.com',
      'matter.closed',
      'c1',
    ]);
    expect(viaSql.rows[0].enqueued).toBe(false);
    await db
      .knex(db.table('event_keys'))
      .where({ idempotency_key: 'c1' })
      .update({ sent_at: db.knex.raw("now() - interval '401 days'") });
    expect(await pruneOutbox(db.knex, db, 7, 400)).toEqual({ pruned: 0, keysForgotten: 1 });
    expect(await enqueueEvents(db.knex, db, [newEvent('c1')])).toBe(1);
  });

  it('prunes more rows than one batch in statements of a batch each, every key kept until the key retention', async () => {
    await outbox().del();
    await db.knex(db.table('event_keys')).del();
    const keys = ['b1', 'b2', 'b3', 'b4', 'b5', 'b6', 'b7'];
    await enqueueEvents(
      db.knex,
      db,
      [...keys, 'b-pending'].map((k) => newEvent(k)),
    );
    await outbox()
      .whereIn('idempotency_key', keys)
      .update({ state: 'sent', sent_at: db.knex.raw("now() - interval '8 days'") });
    // Keys of rows pruned long ago, past the key retention: forgotten in batches too.
    await db.knex(db.table('event_keys')).insert(
      ['k1', 'k2', 'k3', 'k4', 'k5'].map((k) => ({
        idempotency_key: k,
        sent_at: db.knex.raw("now() - interval '401 days'"),
      })),
    );
    // Records how many rows each DELETE statement removed, by table.
    await db.knex.raw('create table ?? (seq serial, tbl text, n int)', [db.table('prune_statements')]);
    await db.knex.raw(
      `create function ${db.schema}.count_pruned() returns trigger language plpgsql as $$
       begin
         insert into ${db.table('prune_statements')} (tbl, n) select tg_table_name, count(*) from gone;
         return null;
       end $$`,
    );
    for (const table of ['events_outbox', 'event_keys'])
      await db.knex.raw(
        `create trigger count_pruned after delete on ?? referencing old table as gone
         for each statement execute function ${db.schema}.count_pruned()`,
        [db.table(table)],
      );
    try {
      expect(await pruneOutbox(db.knex, db, 7, 400, { batch: 3 })).toEqual({ pruned: 7, keysForgotten: 5 });
      const statements = await db.knex(db.table('prune_statements')).orderBy('seq').select('tbl', 'n');
      expect(statements.filter((s) => s.tbl === 'events_outbox').map((s) => s.n)).toEqual([3, 3, 1]);
      expect(statements.filter((s) => s.tbl === 'event_keys').map((s) => s.n)).toEqual([3, 2]);
    } finally {
      for (const table of ['events_outbox', 'event_keys'])
        await db.knex.raw('drop trigger count_pruned on ??', [db.table(table)]);
      await db.knex.raw('drop table ??', [db.table('prune_statements')]);
      await db.knex.raw(`drop function ${db.schema}.count_pruned()`);
    }
    expect(await outbox().pluck('idempotency_key')).toEqual(['b-pending']);
    // Every pruned row's key stays, with its time sent, and is still refused; the forgotten ones are not.
    const kept: Array<{ idempotency_key: string; sent_at: Date | null }> = await db
      .knex(db.table('event_keys'))
      .orderBy('idempotency_key')
      .select('idempotency_key', 'sent_at');
    expect(kept.map((k) => [k.idempotency_key, k.sent_at !== null])).toEqual([
      ['b-pending', false],
      ...keys.map((k) => [k, true]),
    ]);
    expect(
      await enqueueEvents(
        db.knex,
        db,
        keys.map((k) => newEvent(k)),
      ),
    ).toBe(0);
    expect(await enqueueEvents(db.knex, db, [newEvent('k1')])).toBe(1);
  });

  it('reads the backlog gauges from the rows still to send alone, agreeing with the full statistics', async () => {
    await outbox().del();
    await enqueueEvents(
      db.knex,
      db,
      ['g1', 'g2', 'g3', 'g4'].map((k) => newEvent(k)),
    );
    await outbox().where({ idempotency_key: 'g1' }).update({ state: 'sent', sent_at: db.knex.fn.now() });
    await outbox().where({ idempotency_key: 'g2' }).update({ state: 'sending', claimed_by: 'w' });
    await outbox()
      .where({ idempotency_key: 'g3' })
      .update({ enqueued_at: db.knex.raw("now() - interval '90 seconds'") });
    const backlog = await readOutboxBacklog(db.knex, db);
    const stats = await readOutboxStats(db.knex, db);
    expect(backlog.backlog).toBe(3);
    expect(backlog.backlog).toBe(stats.backlog);
    expect(backlog.oldestPendingSeconds).toBeGreaterThanOrEqual(90);
    expect(backlog.oldestPendingSeconds).toBeCloseTo(stats.oldestPendingSeconds, 0);
    await outbox().del();
    expect(await readOutboxBacklog(db.knex, db)).toEqual({ backlog: 0, oldestPendingSeconds: 0 });
  });
});
