import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { type Logger, SecretScrubber } from '../../src/log.js';
import { type Metrics, makeMetrics } from '../../src/metrics.js';
import { DEFAULT_BACKOFF } from '../../src/partner-api/retryPolicy.js';
import { OutboxSender } from '../../src/push/events/outboxSender.js';
import { claimDueEvents, enqueueEvents, releaseExpiredClaims } from '../../src/push/events/outboxSql.js';
import { UNKNOWN_OUTCOME_POLICIES, type UnknownOutcomePolicy } from '../../src/push/events/sendPolicy.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { capturedLog, quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';
import { testApi } from '../pull/helpers.js';
import { newEvent } from './helpers.js';

/**
 * A database restart while the platform is answering: the answer is known, so it is recorded
 * once the database is back, never dropped (which would make the outcome unknown and, under the
 * `retry` policy, send the event to the person again). It needs a server to restart: the local
 * PostgreSQL, through a proxy that refuses connections for a while.
 */
describe('the outbox when the database restarts while an answer is on its way', () => {
  let sandbox: TestSandbox;
  let proxy: TcpProxy;
  let db: Db;
  const schema = uniqueSchema('outage');
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 31 });
    proxy = await startTcpProxy();
    db = await openDb({
      url: proxy.url(new URL(POSTGRES_URL).pathname.slice(1)),
      schema,
      poolMax: 4,
      dataDir: undefined,
    });
    await migrate(db);
  });
  afterAll(async () => {
    await db?.close();
    await proxy?.close();
    await sandbox?.close();
    await dropSchema(schema, POSTGRES_URL);
  });

  it('records the answer once the database is back, and sends the event once', async () => {
    await enqueueEvents(db.knex, db, [
      {
        key: 'outage-1',
        email: 'person@example.com',
        contactId: null,
        eventType: 'matter.closed',
        professionalId: null,
        metadata: null,
        source: 'cli',
      },
    ]);
    // The platform takes the event at once and answers 1.5 s later; meanwhile the database goes
    // down, and it comes back 2.5 s after that.
    await sandbox.control.setFaults({
      partner: { lateAnswer: 1, delayMs: 1_500, routes: ['/api/v1/partner/events'] },
    });
    const api = testApi(sandbox, {
      requestTimeoutMs: 10_000,
      retry: { ...DEFAULT_BACKOFF, maxRetries: 0, budgetMs: 0 },
    });
    const sender = new OutboxSender(
      { db, api, log: quietLog, scrubber: new SecretScrubber() },
      {
        worker: 'outage-test',
        concurrency: 1,
        ratePerSecond: 100,
        leaseMs: 30_000,
        policy: { unknownOutcome: 'retry', maxAttempts: 5, ...DEFAULT_BACKOFF },
      },
    );
    const platformEvents = async () => (await sandbox.control.truth(sandbox.companyId)).events.length;
    try {
      const drained = sender.drain();
      await waitFor(async () => (await platformEvents()) === 1, 10_000, 20);
      proxy.down();
      await sleep(2_500);
      proxy.up();
      // The drain's next claim met the outage and ended it (the daemon starts another); it ended
      // only once the answer it held was recorded.
      await drained.catch(() => undefined);

      const [row] = await db
        .knex(db.table('events_outbox'))
        .select('state', 'possible_duplicate', 'attempts');
      expect(row).toMatchObject({ state: 'sent', possible_duplicate: false, attempts: 1 });
      await sender.drain();
      expect(await platformEvents()).toBe(1);
    } finally {
      await api.close();
    }
  });

  /**
   * An outage longer than the claim's lease: the answer cannot be written before the lease ends,
   * and no one else can take the claim back while the database is away either. Short lease and
   * outage, the same shape as the default 60 s lease and a failover of a few minutes.
   */
  describe('longer than the claim lease', () => {
    const LEASE_MS = 3_000;
    const ANSWER_DELAY_MS = 500;
    // Past the answer plus the lease: the answer's writes have given up, and the claim has lapsed.
    const OUTAGE_MS = ANSWER_DELAY_MS + LEASE_MS + 1_500;

    const received = async (key: string) =>
      (await sandbox.control.truth(sandbox.companyId)).events.filter((e) => e.metadata?.key === key).length;
    const row = async (key: string) =>
      db
        .knex(db.table('events_outbox'))
        .where({ idempotency_key: key })
        .first('state', 'possible_duplicate', 'attempts', 'claimed_by', 'lapsed_claims');

    /**
     * The platform takes `key` at once and answers ANSWER_DELAY_MS later, while the database is
     * down for OUTAGE_MS (longer with `stayDown`): the first drain fails with the answer unwritten.
     */
    async function answerDuringOutage(
      key: string,
      worker: string,
      log: Logger,
      api: ReturnType<typeof testApi>,
      {
        stayDown = false,
        unknownOutcome = 'retry',
        metrics,
      }: { stayDown?: boolean; unknownOutcome?: UnknownOutcomePolicy; metrics?: Metrics } = {},
    ) {
      await enqueueEvents(db.knex, db, [newEvent(key)]);
      await sandbox.control.setFaults({
        partner: { lateAnswer: 1, delayMs: ANSWER_DELAY_MS, routes: ['/api/v1/partner/events'] },
      });
      const sender = new OutboxSender(
        { db, api, log, scrubber: new SecretScrubber(), metrics },
        {
          worker,
          concurrency: 1,
          ratePerSecond: 100,
          leaseMs: LEASE_MS,
          policy: { unknownOutcome, maxAttempts: 5, ...DEFAULT_BACKOFF },
        },
      );
      try {
        const drained = sender.drain().then(
          () => undefined,
          (error: unknown) => error,
        );
        await waitFor(async () => (await received(key)) === 1, 10_000, 20);
        proxy.down();
        await sleep(OUTAGE_MS);
        if (!stayDown) proxy.up();
        expect(await drained).toBeInstanceOf(Error);
      } finally {
        if (!stayDown) proxy.up();
        await sandbox.control.setFaults({});
      }
      return sender;
    }

    /** What OutboxService does: a failed drain is tried again after a pause. */
    async function drainUntilDone(sender: OutboxSender) {
      return waitFor(
        () =>
          sender.drain().catch(async () => {
            await sleep(200);
            return undefined;
          }),
        15_000,
        0,
      );
    }

    /** The kept answers and the lost ones, as an operator's dashboard reads them. */
    const keptAndLost = async (metrics: Metrics) => ({
      kept: (await metrics.eventOutcomesKept.get()).values[0]?.value,
      lost: (await metrics.eventOutcomesLost.get()).values[0]?.value,
    });

    const api = () =>
      testApi(sandbox, {
        requestTimeoutMs: 1_500,
        retry: { ...DEFAULT_BACKOFF, maxRetries: 0, budgetMs: 0 },
      });

    it.each(UNKNOWN_OUTCOME_POLICIES)(
      'writes the answer once the database is back, before taking its own lapsed claim back: sent once (%s)',
      {
        timeout: 30_000,
      },
      async (unknownOutcome) => {
        const client = api();
        const key = `long-outage-1-${unknownOutcome}`;
        const metrics = makeMetrics();
        try {
          const sender = await answerDuringOutage(key, 'outage-long', quietLog, client, {
            unknownOutcome,
            metrics,
          });
          // Still this worker's claim, lapsed: nobody could take it back while the database was away.
          expect(await row(key)).toMatchObject({ state: 'sending', claimed_by: 'outage-long' });
          expect(await keptAndLost(metrics)).toEqual({ kept: 1, lost: 0 });
          await drainUntilDone(sender);
          expect(await keptAndLost(metrics)).toEqual({ kept: 0, lost: 0 });
          expect(await received(key)).toBe(1);
          expect(await row(key)).toMatchObject({
            state: 'sent',
            possible_duplicate: false,
            attempts: 1,
            lapsed_claims: 0,
          });
        } finally {
          await client.close();
        }
      },
    );

    it('an answer kept through the outage that the database refuses once back is recorded reduced: sent once', {
      timeout: 30_000,
    }, async () => {
      const client = api();
      const key = 'long-outage-refused';
      const metrics = makeMetrics();
      // An operator's check that refuses the platform's id for this event, and no other value.
      await db.knex.raw(
        `alter table ?? add constraint refused_id check (idempotency_key <> '${key}' or platform_event_id is null)`,
        [db.table('events_outbox')],
      );
      try {
        const sender = await answerDuringOutage(key, 'outage-refused', quietLog, client, { metrics });
        expect(await keptAndLost(metrics)).toEqual({ kept: 1, lost: 0 });
        await drainUntilDone(sender);
        expect(await received(key)).toBe(1);
        expect(await keptAndLost(metrics)).toEqual({ kept: 0, lost: 0 });
        expect(await row(key)).toMatchObject({ state: 'sent', possible_duplicate: false, attempts: 1 });
        expect(
          await db.knex(db.table('events_outbox')).where({ idempotency_key: key }).first('last_error'),
        ).toEqual({
          last_error: expect.stringMatching(/^the platform's answer could not be stored in full/),
        });
      } finally {
        await db.knex.raw('alter table ?? drop constraint refused_id', [db.table('events_outbox')]);
        await client.close();
      }
    });

    it('writes nothing over a replica that took the claim back first, and says so', {
      timeout: 30_000,
    }, async () => {
      const client = api();
      const { log, lines } = capturedLog();
      try {
        const sender = await answerDuringOutage('long-outage-2', 'outage-late', log, client);
        // Another replica's drain reaches the database first: it takes the lapsed claim back as an
        // unknown outcome and claims the event itself (not sent yet).
        await releaseExpiredClaims(db.knex, db, { unknownOutcome: 'retry', maxAttempts: 5 });
        await claimDueEvents(db.knex, db, 'outage-other', 10, 60_000);
        await drainUntilDone(sender);
        expect(await row('long-outage-2')).toMatchObject({
          state: 'sending',
          claimed_by: 'outage-other',
          possible_duplicate: true,
        });
        expect(await received('long-outage-2')).toBe(1);
        expect(lines.filter((l) => l.level === 'error' && l.idempotency_key === 'long-outage-2')).toEqual([
          expect.objectContaining({
            msg: expect.stringMatching(/^event outcome not recorded \(the database/),
          }),
          expect.objectContaining({
            msg: 'event outcome not recorded: this replica no longer holds its claim; another replica may send it again (possible duplicate)',
          }),
        ]);
      } finally {
        await db.knex(db.table('events_outbox')).where({ idempotency_key: 'long-outage-2' }).del();
        await client.close();
      }
    });

    it('logs each answer it still keeps as lost when the process stops before the database is back', {
      timeout: 30_000,
    }, async () => {
      const client = api();
      const { log, lines } = capturedLog();
      const metrics = makeMetrics();
      try {
        const sender = await answerDuringOutage('long-outage-3', 'outage-stop', log, client, {
          stayDown: true,
          metrics,
        });
        expect(await keptAndLost(metrics)).toEqual({ kept: 1, lost: 0 });
        await sender.close();
        proxy.up();
        expect(await keptAndLost(metrics)).toEqual({ kept: 0, lost: 1 });
        expect(lines.filter((l) => l.level === 'error' && l.idempotency_key === 'long-outage-3')).toEqual([
          expect.objectContaining({
            msg: expect.stringMatching(/^event outcome not recorded \(the database/),
          }),
          expect.objectContaining({
            outcome: 'sent',
            why: 'the process is stopping',
            msg: expect.stringMatching(
              /^event outcome lost: .* unknown outcome \(possible duplicate, or parked\)$/,
            ),
          }),
        ]);
        // Left to the lapsed-claim rules, as a killed worker's claim is.
        expect(await row('long-outage-3')).toMatchObject({ state: 'sending', claimed_by: 'outage-stop' });
      } finally {
        proxy.up();
        await db.knex(db.table('events_outbox')).where({ idempotency_key: 'long-outage-3' }).del();
        await client.close();
      }
    });
  });
});
