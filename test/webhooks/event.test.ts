import { describe, expect, it } from 'vitest';
import {
  headerEventType,
  parseEvent,
  reviewCreatedEventSchema,
  versionTime,
} from '../../src/webhooks/event.js';

const review = {
  id: '6f1c2a5e-8a7b-4c1d-9e2f-0a1b2c3d4e5f',
  review_number: 'R-0A1B2C3D',
  created_at: '2026-11-01T10:00:00Z',
  rating: 5.0,
  comment: null,
  is_verified: false,
  reviewer: { name: null, email: null },
  professional: null,
};
const body = (value: unknown) => Buffer.from(JSON.stringify(value));

describe('parseEvent', () => {
  it('accepts a review.created delivery with extra fields, whatever its body says of the time', () => {
    const parsed = parseEvent(
      body({ event: 'review.created', timestamp: '1700000000', data: review, extra: 1 }),
    );
    expect(parsed).toMatchObject({ ok: true, event: { data: { id: review.id } } });
    // Only the signed X-EE-Timestamp dates a delivery: the body's time is not read.
    for (const timestamp of [1700000000, 'yesterday', undefined]) {
      expect(parseEvent(body({ event: 'review.created', timestamp, data: review })).ok).toBe(true);
    }
  });

  it('reads a delivery as its schema does, whether its review has the spec form or not', () => {
    const variants = [
      review,
      { ...review, professional: { id: review.id, name: 'Dr Who' }, reviewer: { name: 'Ann', email: 'a@b' } },
      // Left to the schema: an upper-case id, an absent field, an offset.
      { ...review, id: review.id.toUpperCase() },
      { ...review, comment: undefined },
      { ...review, created_at: '2026-11-01T10:00:00+00:00' },
    ];
    for (const data of variants) {
      const delivery = { event: 'review.created', timestamp: '1', data, extra: 1 };
      const parsed = parseEvent(body(delivery));
      expect(parsed).toStrictEqual({
        ok: true,
        event: reviewCreatedEventSchema.parse(JSON.parse(JSON.stringify(delivery))),
      });
    }
  });

  it('tells another event type apart, by the signed body first, then by the header', () => {
    const ignored = (eventType: string) => ({ ok: false, reason: 'ignored_event_type', eventType });
    expect(parseEvent(body({ event: 'review.deleted', timestamp: '1', data: review }))).toMatchObject(
      ignored('review.deleted'),
    );
    expect(parseEvent(body({ event: 'review.deleted', data: {} }), 'review.created')).toMatchObject(
      ignored('review.deleted'),
    );
    expect(parseEvent(body({ data: {} }), 'review.updated')).toMatchObject(ignored('review.updated'));
    expect(parseEvent(Buffer.from('a=b'), 'review.updated')).toMatchObject(ignored('review.updated'));
    // The signed body's review.created wins over the header: the server refuses that mismatch.
    expect(parseEvent(body({ event: 'review.created', timestamp: '1', data: review }), 'other').ok).toBe(
      true,
    );
  });

  it('reads a body after one leading UTF-8 byte order mark', () => {
    const delivery = body({ event: 'review.created', timestamp: '1', data: review });
    const bom = Buffer.from([0xef, 0xbb, 0xbf]);
    expect(parseEvent(Buffer.concat([bom, delivery]))).toMatchObject({ ok: true });
    expect(parseEvent(Buffer.concat([bom, bom, delivery]))).toMatchObject({
      ok: false,
      reason: 'invalid_json',
    });
  });

  it('refuses a body that is not UTF-8, whatever type the header names', () => {
    const latin1 = Buffer.from(
      JSON.stringify({ event: 'review.created', data: { ...review, comment: 'Zoë' } }),
      'latin1',
    );
    const refused = { ok: false, reason: 'invalid_json', detail: 'body is not UTF-8' };
    expect(parseEvent(latin1)).toStrictEqual(refused);
    expect(parseEvent(latin1, 'review.updated')).toStrictEqual(refused);
  });

  it('refuses what is not JSON and an invalid review', () => {
    expect(parseEvent(Buffer.from('{"event":'))).toMatchObject({ ok: false, reason: 'invalid_json' });
    expect(parseEvent(Buffer.alloc(0), 'review.created')).toMatchObject({
      ok: false,
      reason: 'invalid_json',
    });
    expect(parseEvent(body({ event: 7, timestamp: '1', data: review }))).toMatchObject({
      ok: false,
      reason: 'invalid_event',
    });
    expect(
      parseEvent(body({ event: 'review.created', timestamp: '1', data: { ...review, id: 'nope' } })),
    ).toMatchObject({ ok: false, reason: 'invalid_event', detail: expect.stringContaining('data.id') });
    expect(parseEvent(body([]))).toMatchObject({ ok: false, reason: 'invalid_event' });
  });
});

describe('headerEventType', () => {
  it('reads a repeated X-EE-Event (joined by commas) as one type, and an empty one as none', () => {
    expect(headerEventType(undefined)).toBeUndefined();
    expect(headerEventType('')).toBeUndefined();
    expect(headerEventType(' , ')).toBeUndefined();
    expect(headerEventType(' review.created ')).toBe('review.created');
    expect(headerEventType('review.created, review.created')).toBe('review.created');
    expect(headerEventType(['review.created', ''])).toBe('review.created');
    // One value other than review.created is what contradicts a review.created body.
    expect(headerEventType('review.created, review.updated')).toBe('review.updated');
    expect(headerEventType(', review.deleted')).toBe('review.deleted');
  });
});

describe('versionTime', () => {
  const signed = 1_800_000_000;
  it('is the body time when it reads as Unix seconds within a week before the signed time', () => {
    expect(versionTime(signed, signed, String(signed - 1_860))).toBe(signed - 1_860);
    expect(versionTime(signed, signed, signed - 60)).toBe(signed - 60);
    expect(versionTime(signed, signed, String(signed - 7 * 86_400))).toBe(signed - 7 * 86_400);
  });
  it('is the signed time, or the arrival when earlier, for any other body time', () => {
    for (const body of [
      undefined,
      null,
      '',
      'yesterday',
      '1.5',
      String(signed * 1000),
      String(signed + 1),
      String(signed - 7 * 86_400 - 1),
      -5,
      { t: 1 },
    ])
      expect(versionTime(signed, signed + 3, body), String(body)).toBe(signed);
    expect(versionTime(signed + 240, signed, undefined)).toBe(signed);
    expect(versionTime(signed + 240, signed, String(signed + 100))).toBe(signed);
  });
});
