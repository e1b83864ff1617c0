import { describe, expect, it } from 'vitest';
import { ApiAuthError, ApiRequestError, ApiUnavailableError } from '../../src/partner-api/errors.js';
import { attemptResultOf, decideAfterAttempt, type SendPolicy } from '../../src/push/events/sendPolicy.js';

const policy: SendPolicy = { unknownOutcome: 'retry', maxAttempts: 3, baseDelayMs: 100, maxDelayMs: 1_000 };
const half = () => 0.5;
const text = (e: unknown) => (e as Error).message;

describe('the events send policy', () => {
  it('classifies what the client threw: refused, not processed, unknown, unauthorized', () => {
    const route = 'POST /events';
    expect(attemptResultOf(new ApiRequestError('bad type', { route, status: 422 }), text).kind).toBe(
      'refused',
    );
    expect(attemptResultOf(new ApiRequestError('busy', { route, status: 409 }), text).kind).toBe(
      'unavailable',
    );
    expect(attemptResultOf(new ApiUnavailableError('500', { route, status: 500 }), text).kind).toBe(
      'unavailable',
    );
    expect(
      attemptResultOf(new ApiUnavailableError('timed out', { route, outcomeUnknown: true }), text).kind,
    ).toBe('unknown');
    expect(attemptResultOf(new ApiAuthError({ route, status: 401 }), text).kind).toBe('unauthorized');
    // Anything unexpected after the request left is never taken for "sent" nor for "not sent".
    expect(attemptResultOf(new TypeError('boom'), text).kind).toBe('unknown');
  });

  it('sends again after a failure the platform did not process, with backoff, up to the attempt limit', () => {
    const result = { kind: 'unavailable', error: '500' } as const;
    expect(decideAfterAttempt(result, 1, policy, half)).toEqual({
      state: 'pending',
      delayMs: 50,
      error: '500',
      possibleDuplicate: false,
      refund: false,
    });
    expect(decideAfterAttempt(result, 2, policy, half)).toMatchObject({ state: 'pending', delayMs: 100 });
    expect(decideAfterAttempt({ ...result, retryAfterMs: 7_000 }, 1, policy, half)).toMatchObject({
      delayMs: 7_000,
    });
    expect(decideAfterAttempt(result, 3, policy, half)).toEqual({ state: 'failed', error: '500' });
  });

  it('an unknown outcome is sent again and counted as a possible duplicate, or parked, as configured', () => {
    const result = { kind: 'unknown', error: 'timed out' } as const;
    expect(decideAfterAttempt(result, 1, policy, half)).toMatchObject({
      state: 'pending',
      possibleDuplicate: true,
    });
    expect(decideAfterAttempt(result, 1, { ...policy, unknownOutcome: 'park' }, half)).toEqual({
      state: 'parked',
      error: 'outcome unknown, parked for an operator: timed out',
    });
  });

  it('a refused event fails for good at once; a refused key keeps the event without counting the attempt', () => {
    expect(decideAfterAttempt({ kind: 'refused', error: '422' }, 1, policy, half)).toEqual({
      state: 'failed',
      error: '422',
    });
    expect(decideAfterAttempt({ kind: 'unauthorized', error: '401' }, 3, policy, half)).toMatchObject({
      state: 'pending',
      refund: true,
      delayMs: policy.maxDelayMs,
    });
    expect(decideAfterAttempt({ kind: 'accepted', id: 'e1', status: 'queued' }, 1, policy, half)).toEqual({
      state: 'sent',
      id: 'e1',
      status: 'queued',
    });
  });
});
