import { describe, expect, it } from 'vitest';
import {
  backoffDelayMs,
  failedBeforeSending,
  isRetryableStatus,
  nextRetryDelayMs,
  parseRetryAfter,
  type RetryPolicy,
  retryAfterOutlastsRetries,
} from '../../src/partner-api/retryPolicy.js';

const policy: RetryPolicy = { maxRetries: 3, budgetMs: 10_000, baseDelayMs: 100, maxDelayMs: 1_000 };

describe('backoffDelayMs (full jitter)', () => {
  it('is uniform below an exponentially growing cap', () => {
    expect(backoffDelayMs(0, policy, () => 0.999)).toBe(99);
    expect(backoffDelayMs(1, policy, () => 0.999)).toBe(199);
    expect(backoffDelayMs(2, policy, () => 0.5)).toBe(200);
    expect(backoffDelayMs(0, policy, () => 0)).toBe(0);
  });

  it('never exceeds the maximum delay, however many retries', () => {
    expect(backoffDelayMs(10, policy, () => 0.999)).toBe(999);
    expect(backoffDelayMs(5_000, policy, () => 0.999)).toBe(999);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  it('reads delta-seconds', () => {
    expect(parseRetryAfter('3', now)).toBe(3000);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter(['2', '9'], now)).toBe(2000);
  });
  it('reads seconds with a fraction, rounded up, and the header folded from two copies', () => {
    expect(parseRetryAfter('1.5', now)).toBe(1500);
    expect(parseRetryAfter('0.0004', now)).toBe(1);
    expect(parseRetryAfter('120, 120', now)).toBe(120_000);
    expect(parseRetryAfter('30,60', now)).toBe(30_000);
  });
  it('reads an HTTP date, a past one meaning now', () => {
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfter('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
  });
  it('ignores anything else', () => {
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('', now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
    expect(parseRetryAfter('-1', now)).toBeUndefined();
    expect(parseRetryAfter('1.', now)).toBeUndefined();
    expect(parseRetryAfter('1e3', now)).toBeUndefined();
  });
});

describe('isRetryableStatus', () => {
  it('retries 429 and 5xx only', () => {
    expect([429, 500, 502, 503, 504].every(isRetryableStatus)).toBe(true);
    expect([200, 400, 401, 403, 404, 409, 422].some(isRetryableStatus)).toBe(false);
  });
});

describe('nextRetryDelayMs', () => {
  const half = () => 0.5;
  it('backs off while retries and budget remain', () => {
    expect(nextRetryDelayMs({ retriesSoFar: 0, elapsedMs: 0, retryAfterMs: undefined }, policy, half)).toBe(
      50,
    );
    expect(nextRetryDelayMs({ retriesSoFar: 2, elapsedMs: 0, retryAfterMs: undefined }, policy, half)).toBe(
      200,
    );
  });
  it('honours Retry-After instead of the backoff', () => {
    expect(nextRetryDelayMs({ retriesSoFar: 0, elapsedMs: 0, retryAfterMs: 4000 }, policy, half)).toBe(4000);
  });
  it('gives up after the last retry', () => {
    expect(nextRetryDelayMs({ retriesSoFar: 3, elapsedMs: 0, retryAfterMs: undefined }, policy, half)).toBe(
      undefined,
    );
    expect(
      nextRetryDelayMs(
        { retriesSoFar: 0, elapsedMs: 0, retryAfterMs: undefined },
        { ...policy, maxRetries: 0 },
        half,
      ),
    ).toBeUndefined();
  });
  it('gives up when the wait would end past the budget', () => {
    expect(
      nextRetryDelayMs({ retriesSoFar: 0, elapsedMs: 9_990, retryAfterMs: undefined }, policy, half),
    ).toBe(undefined);
    expect(
      nextRetryDelayMs({ retriesSoFar: 0, elapsedMs: 0, retryAfterMs: 60_000 }, policy, half),
    ).toBeUndefined();
  });
});

describe('retryAfterOutlastsRetries', () => {
  it('is a wait longer than the whole budget', () => {
    expect(retryAfterOutlastsRetries(10_001, policy)).toBe(true);
    expect(retryAfterOutlastsRetries(10_000, policy)).toBe(false);
    expect(retryAfterOutlastsRetries(1_000, policy)).toBe(false);
  });

  it('is any wait when the client makes no retries, and never no wait', () => {
    expect(retryAfterOutlastsRetries(1_000, { ...policy, maxRetries: 0 })).toBe(true);
    expect(retryAfterOutlastsRetries(0, { ...policy, maxRetries: 0 })).toBe(false);
  });
});

describe('failedBeforeSending', () => {
  const withCode = (code: string, syscall?: string) => Object.assign(new Error(code), { code, syscall });

  it("is true for the platform's certificate refused: Node's verification codes, and a host name not in it", () => {
    for (const code of [
      'DEPTH_ZERO_SELF_SIGNED_CERT',
      'SELF_SIGNED_CERT_IN_CHAIN',
      'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
      'UNABLE_TO_GET_ISSUER_CERT',
      'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
      'CERT_HAS_EXPIRED',
      'CERT_NOT_YET_VALID',
      'CERT_UNTRUSTED',
      'CERT_REVOKED',
      'ERR_TLS_CERT_ALTNAME_INVALID',
    ]) {
      expect(failedBeforeSending(withCode(code)), code).toBe(true);
    }
  });

  it("is false for OpenSSL's errors on the connection, which may come after the request was written", () => {
    for (const code of [
      'ERR_SSL_DECRYPTION_FAILED_OR_BAD_RECORD_MAC',
      'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
      'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
    ]) {
      expect(failedBeforeSending(withCode(code)), code).toBe(false);
    }
  });

  it('is false for anything in doubt: no code, an unknown one, a code on an established connection', () => {
    expect(failedBeforeSending(undefined)).toBe(false);
    expect(failedBeforeSending('CERT_HAS_EXPIRED')).toBe(false);
    expect(failedBeforeSending(new Error('boom'))).toBe(false);
    expect(failedBeforeSending(withCode('ECONNRESET', 'read'))).toBe(false);
    expect(failedBeforeSending(withCode('UND_ERR_SOCKET'))).toBe(false);
  });
});
