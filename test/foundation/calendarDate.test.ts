import { describe, expect, it } from 'vitest';
import { calendarDateExists } from '../../src/calendarDate.js';

describe('calendarDateExists', () => {
  it('takes the dates of the calendar, 29 February of leap years included', () => {
    for (const date of [
      '2026-01-31',
      '2026-02-28',
      '2024-02-29',
      '2000-02-29',
      '2026-12-31T23:59:59Z',
      '0001-01-01',
    ])
      expect(calendarDateExists(date), date).toBe(true);
  });
  it('refuses the days Date.parse rolls over into the next month, and what is no date', () => {
    for (const date of [
      '2026-02-29',
      '1900-02-29',
      '2026-02-30',
      '2026-04-31T12:00:00Z',
      '2026-13-01',
      '2026-00-10',
      '2026-01-00',
      'yesterday',
    ])
      expect(calendarDateExists(date), date).toBe(false);
  });
});
