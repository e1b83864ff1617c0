import { describe, expect, it } from 'vitest';
import { ApiRequestError, ApiUnavailableError } from '../../src/partner-api/errors.js';
import { retryAfterStopOf } from '../../src/push/contacts/unavailableStreak.js';

describe('retryAfterStopOf', () => {
  const answered = (status: number, retryAfterMs?: number, retryAfterOutlastsRetries?: boolean) =>
    new ApiUnavailableError(`POST /contacts answered ${status}`, {
      route: 'POST /contacts',
      status,
      retryAfterMs,
      retryAfterOutlastsRetries,
    });

  it("is the wait of a 429 the client's retries did not get through, outlasted or waited out", () => {
    expect(retryAfterStopOf(answered(429, 600_000, true))).toEqual({ status: 429, retryAfterMs: 600_000 });
    expect(retryAfterStopOf(answered(429, 1_000, false))).toEqual({ status: 429, retryAfterMs: 1_000 });
  });

  it("is the wait of a 503, or any unavailable answer, whose Retry-After outlasted the client's retries", () => {
    expect(retryAfterStopOf(answered(503, 600_000, true))).toEqual({ status: 503, retryAfterMs: 600_000 });
    expect(retryAfterStopOf(answered(502, 600_000, true))).toEqual({ status: 502, retryAfterMs: 600_000 });
  });

  it("is none for a 503 whose Retry-After the client's retries waited out: the contact's own failure", () => {
    expect(retryAfterStopOf(answered(503, 1_000, false))).toBeUndefined();
  });

  it('is none for an answer that asks for no wait', () => {
    for (const status of [429, 503]) {
      expect(retryAfterStopOf(answered(status))).toBeUndefined();
      expect(retryAfterStopOf(answered(status, 0, true))).toBeUndefined();
    }
  });

  it('is none for any other failure', () => {
    const lost = new ApiUnavailableError('POST /contacts timed out', { route: 'POST /contacts' });
    expect(retryAfterStopOf(lost)).toBeUndefined();
    const refused = new ApiRequestError('email taken', { route: 'POST /contacts', status: 409 });
    expect(retryAfterStopOf(refused)).toBeUndefined();
    expect(retryAfterStopOf(new Error('POST /contacts answered 429'))).toBeUndefined();
  });
});
