import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { freshDb, POSTGRES_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { newEvent, quickOutboxSender } from './helpers.js';
import { startOutboxGateway } from './outboxGateway.js';

/**
 * Outcomes are written in groups. One the database refuses (here a check an operator added; the
 * daemon's own values are made storable) must fail alone: the others in its group were answered
 * by the platform, and dropped with it they would lapse and go out again as unknown outcomes. On
 * the local server: the group is formed by holding the table locked from another session.
 */
describe('an outcome the database refuses, written in a group with others', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let gateway: Awaited<ReturnType<typeof startOutboxGateway>>;
  let locker: pg.Client;
  const apis: PartnerApi[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 59 });
    gateway = await startOutboxGateway(sandbox.url);
    db = await freshDb({ url: POSTGRES_URL });
    locker = new pg.Client({ connectionString: POSTGRES_URL });
    await locker.connect();
  });
  afterAll(async () => {
    for (const api of apis) await api.close();
    await locker?.end();
    await gateway?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('fails that one alone: the others of its group are recorded sent', async () => {
    const table = `"${db.schema}".events_outbox`;
    await db.knex.raw(
      `alter table ${table} add constraint poison_pill check (last_error is null or last_error not like '%poison-pill%')`,
    );
    const keys = ['iso-a', 'iso-b', 'iso-c', 'iso-poison'];
    await enqueueEvents(
      db.knex,
      db,
      keys.map((key) => newEvent(key)),
    );
    gateway.gateway.refuse = (body) => (body.includes('iso-poison@') ? 'poison-pill' : undefined);

    // Once all four POSTs are in, the table is locked, so the first outcome's write waits; the
    // others are answered 40 ms apart and the refused one last, so that it joins a group with
    // the two answered after the first. The lock is let go once all four have been answered.
    let arrived = 0;
    let allIn!: () => void;
    const allArrived = new Promise<void>((resolve) => {
      allIn = resolve;
    });
    let answeredOthers = 0;
    gateway.gateway.beforeAnswer = async (body) => {
      arrived++;
      if (arrived === keys.length) {
        await locker.query('begin');
        await locker.query(`lock table ${table} in exclusive mode`);
        allIn();
      }
      await allArrived;
      if (body.includes('iso-poison@')) {
        await sleep(250);
        setTimeout(() => void locker.query('commit'), 300);
      } else {
        await sleep(40 * answeredOthers++);
      }
    };

    const { sender, api } = quickOutboxSender(
      { db, scrubber: new SecretScrubber([sandbox.apiKey]) },
      { url: gateway.url, apiKey: sandbox.apiKey },
      { worker: 'isolation', concurrency: 4 },
    );
    apis.push(api);
    // The refused one is written again alone, reduced (outboxRefusedOutcomes.test.ts), and the
    // drain goes on.
    expect(await sender.drain()).toMatchObject({ sent: 3, failed: 1 });

    const rows = await db
      .knex(db.table('events_outbox'))
      .orderBy('idempotency_key')
      .select('idempotency_key', 'state', 'last_error');
    expect(Object.fromEntries(rows.map((r) => [r.idempotency_key, r.state]))).toEqual({
      'iso-a': 'sent',
      'iso-b': 'sent',
      'iso-c': 'sent',
      'iso-poison': 'failed',
    });
    expect(rows.find((r) => r.idempotency_key === 'iso-poison')?.last_error).toMatch(
      /^the platform's answer could not be stored in full, only its outcome \(failed\): the database refused it \(SQLSTATE 23514, .*"poison_pill"\)$/,
    );
  });
});
