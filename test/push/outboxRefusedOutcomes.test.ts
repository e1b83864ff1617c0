import { describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import type { OutboxSender } from '../../src/push/events/outboxSender.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { capturedLog } from '../helpers/log.js';
import { newEvent, type quickOutboxSender } from './helpers.js';
import { outboxGatewayFixture } from './outboxGateway.js';

/**
 * An outcome whose full write the database refuses (an operator's check: the daemon's own values
 * are made storable) is known all the same: the platform answered. Left `sending`, its claim would
 * lapse and the event be taken back as an unknown outcome, sent to the person a second time. It is
 * written reduced instead: its state, and why the rest could not be stored.
 */
describe('an outcome the database refuses in full', () => {
  const fx = outboxGatewayFixture({ seed: 61 });
  const { received } = fx;
  // With what a reduced write leaves out: the platform's id and when it was sent.
  const row = (key: string) =>
    fx.row(key, ['state', 'possible_duplicate', 'attempts', 'last_error', 'platform_event_id', 'sent_at']);

  const table = () => `"${fx.db.schema}".events_outbox`;
  const sender = (
    worker: string,
    deps: Pick<Parameters<typeof quickOutboxSender>[0], 'log' | 'metrics'> = {},
  ) =>
    fx.sender(
      { scrubber: new SecretScrubber([fx.sandbox.apiKey]), ...deps },
      { url: fx.gatewayUrl },
      { worker, concurrency: 2 },
    );
  /** A drain, its refusal (a failed outcome write ends a drain) returned rather than thrown. */
  const drain = (s: OutboxSender) =>
    s.drain().then(
      (counts) => ({ counts, error: undefined }),
      (error: unknown) => ({ counts: undefined, error: error as { code?: string } }),
    );
  /**
   * What a claim's lease running out does (30 s in these tests), then the next drain: one that
   * takes back a claim left `sending` sends its event again, as an unknown outcome.
   */
  const afterTheLease = async (s: OutboxSender) => {
    await fx.db.knex.raw(
      `update ${table()} set lease_expires_at = now() - interval '1 second' where state = 'sending'`,
    );
    return drain(s);
  };

  it('an accepted event whose platform id is refused is recorded sent, reduced, and never sent again', async () => {
    await fx.db.knex.raw(
      `alter table ${table()} add constraint no_id_for_accepted
         check (idempotency_key <> 'refused-accepted' or platform_event_id is null)`,
    );
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('refused-accepted'), newEvent('refused-beside')]);
    const s = sender('refused-accepted');

    const first = await drain(s);
    const second = await afterTheLease(s);

    // Once each: the platform's answer was known, so nothing went out again.
    expect(await received('refused-accepted')).toBe(1);
    expect(await received('refused-beside')).toBe(1);
    expect(first).toMatchObject({ counts: { sent: 2, retried: 0, possibleDuplicates: 0 }, error: undefined });
    expect(second).toMatchObject({ counts: { sent: 0, retried: 0 }, error: undefined });
    const reduced = await row('refused-accepted');
    expect(reduced).toMatchObject({
      state: 'sent',
      possible_duplicate: false,
      attempts: 1,
      platform_event_id: null,
    });
    expect(reduced?.sent_at).not.toBeNull();
    expect(reduced?.last_error).toMatch(
      /^the platform's answer could not be stored in full, only its outcome \(sent\): the database refused it \(SQLSTATE 23514, database: .*"no_id_for_accepted"\)$/,
    );
    expect(await row('refused-beside')).toMatchObject({ state: 'sent', last_error: null });
    expect((await row('refused-beside'))?.platform_event_id).not.toBeNull();
  });

  it("an operator's trigger refusing it (RAISE EXCEPTION) is a refusal too: recorded reduced, not retried for ever", async () => {
    await fx.db.knex.raw(`
      create function "${fx.db.schema}".refuse_event_id() returns trigger language plpgsql as $$
      begin
        if new.idempotency_key = 'raised-accepted' and new.platform_event_id is not null then
          raise exception 'no platform ids here';
        end if;
        return new;
      end $$`);
    await fx.db.knex.raw(
      `create trigger refuse_event_id before update on ${table()} for each row execute function "${fx.db.schema}".refuse_event_id()`,
    );
    try {
      await enqueueEvents(fx.db.knex, fx.db, [newEvent('raised-accepted')]);
      const s = sender('raised-accepted');
      const first = await drain(s);
      const second = await afterTheLease(s);

      expect(await received('raised-accepted')).toBe(1);
      expect(first).toMatchObject({ counts: { sent: 1 }, error: undefined });
      expect(second).toMatchObject({ counts: { sent: 0, retried: 0 }, error: undefined });
      const reduced = await row('raised-accepted');
      expect(reduced).toMatchObject({ state: 'sent', platform_event_id: null });
      expect(reduced?.last_error).toMatch(/SQLSTATE P0001, .*no platform ids here/);
    } finally {
      await fx.db.knex.raw(`drop trigger refuse_event_id on ${table()}`);
    }
  });

  it('a 503 whose text is refused is due again, not flagged: it never reached the platform', async () => {
    await fx.db.knex.raw(
      `alter table ${table()} add constraint no_unavailable_text
         check (idempotency_key <> 'refused-unavailable' or last_error not like '%answered 503%')`,
    );
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('refused-unavailable')]);
    fx.gateway.unavailable = 1;
    const s = sender('refused-unavailable');

    const first = await drain(s);
    const reduced = await row('refused-unavailable');
    const second = await afterTheLease(s);

    expect(await received('refused-unavailable')).toBe(1);
    expect(reduced).toMatchObject({ state: 'pending', possible_duplicate: false });
    expect(reduced?.last_error).toMatch(/could not be stored in full, only its outcome \(pending\)/);
    expect(first).toMatchObject({ counts: { retried: 1, possibleDuplicates: 0 }, error: undefined });
    expect(second).toMatchObject({ counts: { sent: 1, possibleDuplicates: 0 }, error: undefined });
    expect(await row('refused-unavailable')).toMatchObject({
      state: 'sent',
      possible_duplicate: false,
      attempts: 2,
      last_error: null,
    });
  });

  it('refused even reduced: logged as lost with its key, and taken back once its claim lapses, as before', async () => {
    await fx.db.knex.raw(
      `alter table ${table()} add constraint never_sent check (idempotency_key <> 'refused-twice' or state <> 'sent')`,
    );
    await enqueueEvents(fx.db.knex, fx.db, [newEvent('refused-twice')]);
    const { log, lines } = capturedLog();
    const metrics = makeMetrics();
    const s = sender('refused-twice', { log, metrics });

    expect((await drain(s)).error?.code).toBe('23514');
    expect(await row('refused-twice')).toMatchObject({ state: 'sending' });
    const lost = lines.filter((l) => l.msg.startsWith('event outcome lost'));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatchObject({ level: 'error', idempotency_key: 'refused-twice', outcome: 'sent' });
    expect((lost[0] as { why?: string }).why).toMatch(
      /even reduced to its outcome.*SQLSTATE 23514, .*"never_sent"/,
    );
    expect((await metrics.eventOutcomesLost.get()).values[0]?.value).toBe(1);

    // As any outcome never recorded: an unknown one once its claim lapses, sent again, flagged.
    expect((await afterTheLease(s)).error?.code).toBe('23514');
    expect(await received('refused-twice')).toBe(2);
    expect(await row('refused-twice')).toMatchObject({ state: 'sending', possible_duplicate: true });
  });
});
