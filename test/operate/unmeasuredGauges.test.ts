import { describe, expect, it } from 'vitest';
import { makeMetrics } from '../../src/metrics.js';

/** The value a scrape shows for an unlabelled metric, or undefined when it exports no sample. */
async function sample(metrics: ReturnType<typeof makeMetrics>, name: string): Promise<number | undefined> {
  const line = (await metrics.registry.metrics()).split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

/**
 * A gauge read from the outbox or set by a push exports nothing until it has a value: a 0 nobody
 * measured reads as "no backlog" or "a push that moved nothing" on a dashboard, and as a level the
 * alerts compare, from a replica whose outbox never read (no API key, a database away since start).
 */
describe('gauges before their first reading', () => {
  const unmeasured = [
    'review_mirror_outbox_backlog',
    'review_mirror_outbox_oldest_pending_seconds',
    'review_mirror_contacts_push_rows_per_second',
  ];

  it.each(unmeasured)('%s is absent until read, then exported, 0 included', async (name) => {
    const metrics = makeMetrics();
    const text = await metrics.registry.metrics();
    // Still described, for a scrape and docs/metrics.md alike.
    expect(text).toContain(`# TYPE ${name} gauge`);
    expect(await sample(metrics, name)).toBeUndefined();
    const gauge = {
      review_mirror_outbox_backlog: metrics.outboxBacklog,
      review_mirror_outbox_oldest_pending_seconds: metrics.outboxOldestPending,
      review_mirror_contacts_push_rows_per_second: metrics.contactsRowsPerSecond,
    }[name]!;
    gauge.set(0);
    expect(await sample(metrics, name)).toBe(0);
    gauge.set(12);
    expect(await sample(metrics, name)).toBe(12);
  });
});
