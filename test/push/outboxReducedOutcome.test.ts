import { describe, expect, it } from 'vitest';
import { describeError } from '../../src/errors.js';
import { SecretScrubber } from '../../src/log.js';
import type { RecordedDecision } from '../../src/push/events/outboxSql.js';
import { reducedDecision, refusalOf } from '../../src/push/events/sendPolicy.js';

/** A statement the database refused, as db/connect.ts leaves it: SQLSTATE and the server's words. */
const refused = (code: string, message: string) =>
  Object.assign(new Error(`update "t"."events_outbox" … - ${message}`), { code, databaseMessage: message });
const secret = 'sk_live_0123456789abcdef';
const scrubber = new SecretScrubber([secret]);
const describe_ = (e: unknown) => scrubber.scrub(describeError(e));

const accepted: RecordedDecision = {
  id: 7,
  claim: '1:1732700000000000',
  state: 'sent',
  delayMs: 0,
  error: null,
  possibleDuplicate: true,
  refund: false,
  platformId: 'evt_123',
  platformStatus: 'queued',
};

describe('an outcome reduced after the database refused it in full', () => {
  it("names the refusal by its SQLSTATE and the database's message, scrubbed, without the failing row", () => {
    const error = refused(
      '23514',
      'new row for relation "events_outbox" violates check constraint "poison_pill"',
    );
    expect(refusalOf(error, describe_)).toBe(
      'SQLSTATE 23514, database: new row for relation "events_outbox" violates check constraint "poison_pill"',
    );
    // A trigger may say anything: a secret in its words is not stored.
    const trigger = refused('P0001', `refused: key ${secret} is not allowed`);
    expect(refusalOf(trigger, describe_)).not.toContain(secret);
    expect(refusalOf(new Error('no code'), describe_)).toBe('no code');
  });

  it('keeps a refusal short, whatever the database said', () => {
    const long = refusalOf(refused('22001', 'x'.repeat(5_000)), describe_);
    expect(long).toHaveLength(300);
    expect(long.endsWith('…')).toBe(true);
  });

  it("keeps the decision (state, when due, the flag, the refund), drops the platform's words for why", () => {
    const reduced = reducedDecision(accepted, 'SQLSTATE 23514, database: violates check constraint "c"');
    expect(reduced).toEqual({
      ...accepted,
      platformId: null,
      platformStatus: null,
      error:
        'the platform\'s answer could not be stored in full, only its outcome (sent): the database refused it (SQLSTATE 23514, database: violates check constraint "c")',
    });
    const pending: RecordedDecision = {
      ...accepted,
      state: 'pending',
      delayMs: 60_000,
      error: 'POST /events answered 503 <html>…',
      refund: true,
      platformId: null,
      platformStatus: null,
    };
    expect(reducedDecision(pending, 'why')).toMatchObject({
      state: 'pending',
      delayMs: 60_000,
      possibleDuplicate: true,
      refund: true,
      error:
        "the platform's answer could not be stored in full, only its outcome (pending): the database refused it (why)",
    });
  });
});
