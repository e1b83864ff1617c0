import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Db, openDb } from '../../src/db/connect.js';
import { migrate } from '../../src/db/migrate.js';
import { SecretScrubber } from '../../src/log.js';
import { DEFAULT_BACKOFF } from '../../src/partner-api/retryPolicy.js';
import { OutboxSender } from '../../src/push/events/outboxSender.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { dropSchema, POSTGRES_URL, uniqueSchema } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcpProxy.js';
import { waitFor } from '../helpers/wait.js';
import { testApi } from '../pull/helpers.js';

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
});
