import { describe, expect, it } from 'vitest';
import { isoTimestamp } from '../../src/partner-api/timestampSchema.js';

const reasons = (value: string) => isoTimestamp.safeParse(value).error?.issues.map((i) => i.message) ?? [];

describe('isoTimestamp', () => {
  it('takes ISO 8601 with an offset that PostgreSQL timestamptz can hold', () => {
    for (const ok of [
      '2026-01-01T10:00:00Z',
      '2026-01-01T10:00:00.123456789Z',
      '2026-01-01T10:00:00+15:59',
      '2026-01-01T10:00:00-15:59',
      '0001-01-01T00:00:00+01:00',
      '9999-12-31T23:59:59-15:59',
    ]) {
      expect(reasons(ok), ok).toEqual([]);
    }
  });

  it('refuses what PostgreSQL refuses, year zero and offsets of 16 hours or more, saying why', () => {
    for (const bad of ['0000-06-01T00:00:00Z', '2026-01-01T10:00:00+16:00', '2026-01-01T10:00:00-23:59']) {
      expect(reasons(bad), bad).toEqual([
        'must be a timestamp PostgreSQL can store (year 0001 or later, UTC offset within ±15:59)',
      ]);
    }
  });

  it('gives one reason for text that is no timestamp at all', () => {
    expect(reasons('2025-02-29T10:00:00Z')).toEqual(['must be an ISO 8601 timestamp']);
    expect(reasons('yesterday')).toEqual(['must be an ISO 8601 timestamp']);
  });
});
