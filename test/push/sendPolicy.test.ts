import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import {
  ApiAuthError,
  ApiRequestError,
  ApiUnavailableError,
  EventBodyError,
} from '../../src/partner-api/errors.js';
import { makeEventsApi } from '../../src/partner-api/events.js';
import type { HttpClient } from '../../src/partner-api/http.js';
import { failedBeforeSending } from '../../src/partner-api/retryPolicy.js';
import {
  attemptResultOf,
  ClaimDeadlineError,
  decideAfterAttempt,
  NOT_SENT_MAX_DELAY_MS,
  provenNotSent,
  type SendPolicy,
  UNKNOWN_OUTCOME_POLICIES,
} from '../../src/push/events/sendPolicy.js';

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
    expect(attemptResultOf(new ApiUnavailableError('503', { route, status: 503 }), text).kind).toBe(
      'unavailable',
    );
    expect(
      attemptResultOf(new ApiUnavailableError('timed out', { route, outcomeUnknown: true }), text).kind,
    ).toBe('unknown');
    expect(attemptResultOf(new ApiAuthError({ route, status: 401 }), text).kind).toBe('unauthorized');
    // A 403 is an ApiAuthError when the check of the key failed too, and the key's outage...
    expect(attemptResultOf(new ApiAuthError({ route, status: 403 }), text).kind).toBe('unauthorized');
    // ...else the platform refusing this event: failed for good, not flagged, as a 422.
    const forbidden = attemptResultOf(new ApiRequestError('opted out', { route, status: 403 }), text);
    expect(forbidden).toEqual({ kind: 'refused', error: 'POST /events answered 403: opted out' });
    expect(decideAfterAttempt(forbidden, 1, policy, half)).toEqual({
      state: 'failed',
      error: 'POST /events answered 403: opted out',
    });
    // Anything unexpected after the request left is never taken for "sent" nor for "not sent".
    expect(attemptResultOf(new TypeError('boom'), text).kind).toBe('unknown');
  });

  it('sends again after a failure the platform did not process, with backoff, never failing it by the attempt count', () => {
    const result = { kind: 'unavailable', error: '503' } as const;
    expect(decideAfterAttempt(result, 1, policy, half)).toEqual({
      state: 'pending',
      delayMs: 50,
      error: '503',
      possibleDuplicate: false,
      refund: false,
    });
    expect(decideAfterAttempt(result, 2, policy, half)).toMatchObject({ state: 'pending', delayMs: 100 });
    expect(decideAfterAttempt({ ...result, retryAfterMs: 7_000 }, 1, policy, half)).toMatchObject({
      delayMs: 7_000,
    });
    // Past EVENTS_MAX_ATTEMPTS (3 here) and whatever the policy: pending, flagged as nothing, the
    // wait growing past maxDelayMs (1 s) up to NOT_SENT_MAX_DELAY_MS, then staying there.
    for (const unknownOutcome of UNKNOWN_OUTCOME_POLICIES) {
      for (const [attempts, delayMs] of [
        [3, 200],
        [10, 25_600],
        [13, 150_000],
        [1_000, 150_000],
      ] as const) {
        expect(decideAfterAttempt(result, attempts, { ...policy, unknownOutcome }, half)).toEqual({
          state: 'pending',
          delayMs,
          error: '503',
          possibleDuplicate: false,
          refund: false,
        });
      }
    }
    expect(NOT_SENT_MAX_DELAY_MS).toBe(300_000);
    expect(
      decideAfterAttempt(result, 1_000, { ...policy, notSentMaxDelayMs: 60_000 }, () => 0.999),
    ).toMatchObject({ delayMs: 59_940 });
    // Already flagged (an unknown outcome before): a proven not sent attempt changes nothing of it.
    expect(decideAfterAttempt(result, 5, policy, half, true)).toMatchObject({
      state: 'pending',
      possibleDuplicate: false,
    });
  });

  it("waits the platform's Retry-After the client's error carries, at most an hour", () => {
    const route = 'POST /events';
    for (const status of [429, 503]) {
      const error = new ApiUnavailableError(String(status), { route, status, retryAfterMs: 120_000 });
      const result = attemptResultOf(error, text);
      expect(result).toEqual({ kind: 'unavailable', error: String(status), retryAfterMs: 120_000 });
      expect(decideAfterAttempt(result, 1, policy, half)).toMatchObject({
        state: 'pending',
        delayMs: 120_000,
      });
      // Years, as the platform's text may say: an hour, and then asked again.
      const years = { ...result, retryAfterMs: 1e15 };
      expect(decideAfterAttempt(years, 1, policy, half)).toMatchObject({ delayMs: 3_600_000 });
      // Without one, the backoff decides.
      const bare = attemptResultOf(new ApiUnavailableError(String(status), { route, status }), text);
      expect(bare).toEqual({ kind: 'unavailable', error: String(status), retryAfterMs: undefined });
      expect(decideAfterAttempt(bare, 1, policy, half)).toMatchObject({ delayMs: 50 });
    }
  });

  it('a 500, 502 or 504 is an unknown outcome: the platform, or a gateway in front of it, may have acted on the POST', () => {
    const route = 'POST /events';
    for (const status of [500, 501, 502, 504, 505, 520, 599]) {
      const result = attemptResultOf(new ApiUnavailableError(`answered ${status}`, { route, status }), text);
      expect(result, String(status)).toEqual({ kind: 'unknown', error: `answered ${status}` });
      expect(decideAfterAttempt(result, 1, policy, half)).toMatchObject({
        state: 'pending',
        possibleDuplicate: true,
      });
      expect(decideAfterAttempt(result, 1, { ...policy, unknownOutcome: 'park' }, half)).toMatchObject({
        state: 'parked',
      });
    }
    // Only a 503 and a 429 prove the platform did not act on it.
    for (const status of [429, 503]) {
      expect(attemptResultOf(new ApiUnavailableError('x', { route, status }), text).kind).toBe('unavailable');
    }
  });

  it('an unknown outcome of an event already sent again after one is parked: the platform holds at most two copies', () => {
    const result = { kind: 'unknown', error: 'POST /events answered 502' } as const;
    // The first unknown outcome: sent again, flagged.
    expect(decideAfterAttempt(result, 1, policy, half, false)).toMatchObject({
      state: 'pending',
      possibleDuplicate: true,
    });
    // The resend's outcome is unknown too: not sent a third time, whatever attempts are left.
    const parked = {
      state: 'parked',
      error:
        'outcome unknown again after it was sent again following an unknown outcome (the platform may have it twice): parked for an operator, not sent a third time: POST /events answered 502',
    };
    expect(decideAfterAttempt(result, 2, policy, half, true)).toEqual(parked);
    expect(decideAfterAttempt(result, 3, policy, half, true)).toEqual(parked);
    // Any other answer to the resend is taken as it is.
    expect(decideAfterAttempt({ kind: 'accepted', id: null, status: null }, 2, policy, half, true)).toEqual({
      state: 'sent',
      id: null,
      status: null,
    });
    expect(decideAfterAttempt({ kind: 'refused', error: '422' }, 2, policy, half, true)).toEqual({
      state: 'failed',
      error: '422',
    });
  });

  it('the first unknown outcome is sent again once whatever attempts proven not sent came before it', () => {
    const result = { kind: 'unknown', error: 'timed out' } as const;
    // Past EVENTS_MAX_ATTEMPTS (3 here): the attempts before were 503s, 429s, refused connections.
    for (const attempts of [3, 4, 1_000]) {
      expect(decideAfterAttempt(result, attempts, policy, half)).toMatchObject({
        state: 'pending',
        possibleDuplicate: true,
        refund: false,
      });
      // The resend's outcome unknown too: parked, never a third copy.
      expect(decideAfterAttempt(result, attempts + 1, policy, half, true)).toMatchObject({ state: 'parked' });
    }
  });

  it('with EVENTS_MAX_ATTEMPTS=1 an unknown outcome fails the event flagged a possible duplicate: it may have been delivered', () => {
    const result = { kind: 'unknown', error: 'timed out' } as const;
    const once = { ...policy, maxAttempts: 1 };
    for (const attempts of [1, 7]) {
      expect(decideAfterAttempt(result, attempts, once, half)).toEqual({
        state: 'failed',
        error: 'timed out',
        possibleDuplicate: true,
      });
    }
    expect(decideAfterAttempt(result, 1, { ...once, unknownOutcome: 'park' }, half)).toMatchObject({
      state: 'parked',
    });
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

  it('a redirect (3xx) keeps the event without counting the attempt, naming the redirected base URL', () => {
    for (const status of [301, 307, 308]) {
      const said = 'redirected to https://x.example/api/v1/partner/events, not followed: set REVIEWS_API_URL';
      const result = attemptResultOf(new ApiRequestError(said, { route: 'POST /events', status }), text);
      expect(result).toEqual({ kind: 'misrouted', error: `POST /events answered ${status}: ${said}` });
      expect(decideAfterAttempt(result, 3, policy, half)).toEqual({
        state: 'pending',
        delayMs: policy.maxDelayMs,
        error: result.kind === 'misrouted' ? result.error : '',
        possibleDuplicate: false,
        refund: true,
      });
    }
  });

  it('a 405 (the route not served there) keeps the event without counting the attempt; a 404 refuses it', () => {
    const result = attemptResultOf(
      new ApiRequestError('(no error text)', { route: 'POST /events', status: 405 }),
      text,
    );
    expect(result).toEqual({
      kind: 'misrouted',
      error:
        'POST /events answered 405: (no error text) (the route is not served at REVIEWS_API_URL: nothing was processed; kept until it is, by REVIEWS_API_URL or the gateway in front)',
    });
    expect(decideAfterAttempt(result, 3, policy, half)).toMatchObject({
      state: 'pending',
      delayMs: policy.maxDelayMs,
      possibleDuplicate: false,
      refund: true,
    });
    // The platform's answer to an event for an unknown contact is not shown: a 404 may be that.
    const notFound = attemptResultOf(
      new ApiRequestError('no such contact', { route: 'POST /events', status: 404 }),
      text,
    );
    expect(notFound.kind).toBe('refused');
  });

  it('a 504 from a gateway is an unknown outcome: the platform may have acted on the POST', () => {
    const result = attemptResultOf(
      new ApiUnavailableError('504', { route: 'POST /events', status: 504 }),
      text,
    );
    expect(result.kind).toBe('unknown');
    expect(decideAfterAttempt(result, 1, policy, half)).toMatchObject({
      state: 'pending',
      possibleDuplicate: true,
    });
  });

  it("a send cut off at its claim's deadline: unknown in flight, not sent while waiting to send again", async () => {
    const deadline = new ClaimDeadlineError('POST /events');
    expect(attemptResultOf(deadline, text)).toEqual({
      kind: 'unknown',
      error:
        "POST /events was cut off before this replica's claim on the event ran out: it may have reached the platform",
    });
    // What a sleep aborted with that reason throws, as the client's wait before a retry does.
    const waiting = await sleep(60_000, undefined, { signal: AbortSignal.abort(deadline) }).catch((e) => e);
    expect(attemptResultOf(waiting, text)).toMatchObject({ kind: 'unavailable' });
    expect(decideAfterAttempt(attemptResultOf(waiting, text), 1, policy, half)).toMatchObject({
      state: 'pending',
      possibleDuplicate: false,
    });
  });
  describe('failures proven to have sent nothing', () => {
    const route = 'POST /events';
    // As the client builds it from what undici threw (src/partner-api/http.ts).
    const failedWith = (cause: object, over: { status?: number } = {}) =>
      new ApiUnavailableError(`${route} failed`, {
        route,
        cause,
        outcomeUnknown: !failedBeforeSending(cause),
        ...over,
      });
    const systemError = (code: string, syscall?: string) => Object.assign(new Error(code), { code, syscall });
    // What Node's TLS socket is destroyed with (no system call), and undici passes on as is.
    const tlsError = (code: string) => Object.assign(new Error(code), { code });

    it('are what fails before dispatch: a refused argument, a connect or a name lookup, a body never written', () => {
      for (const error of [
        failedWith(Object.assign(new Error('invalid x-api-key header'), { code: 'UND_ERR_INVALID_ARG' })),
        failedWith(Object.assign(new Error('Connect Timeout Error'), { code: 'UND_ERR_CONNECT_TIMEOUT' })),
        failedWith(systemError('ECONNREFUSED', 'connect')),
        failedWith(systemError('ENETUNREACH', 'connect')),
        failedWith(systemError('EACCES', 'connect')),
        failedWith(systemError('ENOTFOUND', 'getaddrinfo')),
        failedWith(systemError('EAI_AGAIN', 'getaddrinfo')),
        // The platform's certificate refused at the end of a new connection's handshake.
        failedWith(tlsError('DEPTH_ZERO_SELF_SIGNED_CERT')),
        failedWith(tlsError('SELF_SIGNED_CERT_IN_CHAIN')),
        failedWith(tlsError('UNABLE_TO_VERIFY_LEAF_SIGNATURE')),
        failedWith(tlsError('UNABLE_TO_GET_ISSUER_CERT_LOCALLY')),
        failedWith(tlsError('CERT_HAS_EXPIRED')),
        failedWith(tlsError('CERT_NOT_YET_VALID')),
        failedWith(tlsError('ERR_TLS_CERT_ALTNAME_INVALID')),
        new EventBodyError('POST /events not sent'),
        new ClaimDeadlineError(route, false),
      ]) {
        expect(provenNotSent(error)).toBe(true);
        const result = attemptResultOf(error, text);
        expect(result.kind).toBe('unavailable');
        expect(decideAfterAttempt(result, 1, { ...policy, unknownOutcome: 'park' }, half)).toMatchObject({
          state: 'pending',
          possibleDuplicate: false,
        });
      }
    });

    it('are never what may have come after the request was written: in doubt, unknown', () => {
      for (const error of [
        failedWith(systemError('ECONNRESET', 'read')),
        failedWith(systemError('EPIPE', 'write')),
        failedWith(systemError('EHOSTUNREACH')),
        failedWith(Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' })),
        failedWith(Object.assign(new Error('Request aborted'), { code: 'UND_ERR_ABORTED' })),
        failedWith(Object.assign(new Error('Headers Timeout Error'), { code: 'UND_ERR_HEADERS_TIMEOUT' })),
        // OpenSSL's errors on the connection itself may come once the request was written.
        failedWith(tlsError('ERR_SSL_DECRYPTION_FAILED_OR_BAD_RECORD_MAC')),
        failedWith(tlsError('ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE')),
        // The status had come, then the body was lost: an answer, whatever its cause's code says.
        new ApiUnavailableError(`${route} answered 200, then its body was cut off (ECONNREFUSED)`, {
          route,
          cause: systemError('ECONNREFUSED', 'connect'),
          outcomeUnknown: true,
        }),
        // A status came back: an answer, not a failure before dispatch.
        failedWith(systemError('ECONNREFUSED', 'connect'), { status: 504 }),
        failedWith(new TypeError('boom')),
        new ClaimDeadlineError(route),
        new TypeError('boom'),
        new RangeError('Invalid string length'),
      ]) {
        expect(provenNotSent(error)).toBe(false);
        expect(attemptResultOf(error, text).kind).toBe('unknown');
      }
    });

    it('a body that cannot be written as JSON fails before the client is called', async () => {
      let requests = 0;
      const http = {
        request: async () => {
          requests++;
          return { id: '1', status: null };
        },
      } as unknown as HttpClient;
      const events = makeEventsApi(http);
      const circular: Record<string, unknown> = {};
      circular.self = circular;
      for (const metadata of [{ n: 1n }, circular]) {
        const error = await events
          .send({ event_type: 'x', email: 'a@example.com', metadata })
          .catch((e) => e);
        expect(error).toBeInstanceOf(EventBodyError);
        expect(attemptResultOf(error, text)).toMatchObject({ kind: 'unavailable' });
      }
      expect(requests).toBe(0);
      await expect(events.send({ event_type: 'x', email: 'a@example.com' })).resolves.toEqual({
        id: '1',
        status: null,
      });
    });
  });
});
