import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/schema.js';
import type { Db } from '../../src/db/connect.js';
import { SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { OutboxService } from '../../src/push/events/outboxService.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { freshDb } from '../helpers/db.js';
import { capturedLog, quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { testApi } from '../pull/helpers.js';
import { newEvent } from './helpers.js';

/**
 * The outbox worker stops at once whenever the stop comes: one that came while a drain or its
 * housekeeping ran found the worker's wait for the next poll not yet begun, and that wait heard
 * no stop, so shutdown waited out EVENTS_POLL_SECONDS (a minute here; `run`'s deadline is the
 * grace plus 5 s, so it exited 1 with the outbox abandoned).
 */
describe('the outbox worker stopped while it drains or keeps house', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 29 });
    db = await freshDb();
    api = testApi(sandbox);
  });
  afterAll(async () => {
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('ends without waiting out the poll', { timeout: 30_000 }, async () => {
    const config = parseConfig({ EVENTS_POLL_SECONDS: '60' });
    const metrics = makeMetrics();
    let service: OutboxService | undefined;
    let stopped: Promise<void> | undefined;
    // The housekeeping's last step, after the drain: the stop comes just before the worker waits.
    const setBacklog = metrics.outboxBacklog.set.bind(metrics.outboxBacklog);
    metrics.outboxBacklog.set = ((value: number) => {
      setBacklog(value);
      stopped ??= service?.stop();
    }) as typeof metrics.outboxBacklog.set;
    service = new OutboxService(
      { db, api, log: quietLog, scrubber: new SecretScrubber(), metrics },
      { ...config.events, listenUrl: undefined },
    );
    const startedAt = Date.now();
    service.start();
    while (stopped === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
    await stopped;
    // Far below the poll's minute: a stop that waited it out would take that long.
    expect(Date.now() - startedAt).toBeLessThan(config.events.pollMs / 2);
  });
});

/**
 * The outbox's housekeeping is not its drain: a prune that fails every time (a DELETE past
 * statement_timeout, simulated by a trigger raising SQLSTATE 57014) was run in the drain's own try,
 * so it failed every drain and the worker slept its failure backoff (1 s, 2 s, 4 s, … up to 30 s),
 * which a wake does not cut short: new events waited it out instead of going out at once.
 */
describe('the outbox worker while its prune fails', () => {
  let sandbox: TestSandbox;
  let db: Db;
  let api: PartnerApi;
  let service: OutboxService | undefined;
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 31 });
    db = await freshDb();
    api = testApi(sandbox);
    await db.knex.raw(
      `create function ${db.schema}.prune_times_out() returns trigger language plpgsql as $$
       begin raise exception 'canceling statement due to statement timeout' using errcode = '57014'; end $$`,
    );
    await db.knex.raw(
      `create trigger prune_times_out before delete on ?? for each row execute function ${db.schema}.prune_times_out()`,
      [db.table('events_outbox')],
    );
    // A sent row past the retention: the prune has something to delete.
    await enqueueEvents(db.knex, db, [newEvent('old-1')]);
    await db
      .knex(db.table('events_outbox'))
      .update({ state: 'sent', sent_at: db.knex.raw("now() - interval '30 days'") });
  });
  afterAll(async () => {
    await service?.stop();
    await api?.close();
    await db?.close();
    await sandbox?.close();
  });

  it('sends a new event as soon as it is woken, logging the prune apart and not retrying it at every drain', {
    timeout: 30_000,
  }, async () => {
    const { log, lines } = capturedLog();
    const config = parseConfig({ EVENTS_POLL_SECONDS: '60' });
    const metrics = makeMetrics();
    service = new OutboxService(
      { db, api, log, scrubber: new SecretScrubber(), metrics },
      { ...config.events, listenUrl: undefined },
    );
    service.start();
    await waitFor(() => lines.length > 0);
    // Long enough for a worker failing at every drain to be in a backoff of 4 s (after 1 s and 2 s).
    await sleep(3_500);
    const state = (key: string) =>
      db.knex(db.table('events_outbox')).where({ idempotency_key: key }).first('state');
    for (const key of ['new-1', 'new-2']) {
      await enqueueEvents(db.knex, db, [newEvent(key)]);
      service.wake();
      await waitFor(async () => (await state(key))?.state === 'sent', 10_000);
    }
    // One prune, failed and logged as such; the drains after it neither failed (no 'outbox worker
    // failed; retrying', whose backoff a wake does not cut short) nor tried it again.
    expect(lines.map((l) => l.msg)).toEqual([
      'could not prune the events outbox; the events are sent meanwhile',
    ]);
    expect(lines[0]).toMatchObject({ failures: 1, retryInSeconds: 60 });
    // Counted, for the alert on prunes that keep failing.
    const failures = (await metrics.pruneFailures.get()).values;
    expect(failures.find((v) => v.labels.table === 'events_outbox')?.value).toBe(1);
    expect(await state('old-1')).toEqual({ state: 'sent' });
  });
});
