import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/schema.js';
import type { Db } from '../../src/db/connect.js';
import { SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { OutboxService } from '../../src/push/events/outboxService.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';

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
