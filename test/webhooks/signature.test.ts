import { describe, expect, it } from 'vitest';
import { MAX_SIGNATURES, signDelivery, verifyDelivery } from '../../src/webhooks/signature.js';

// Vectors computed independently of this code, with OpenSSL:
//   printf '%s' '1700000000.{"event":"review.created"}' | openssl dgst -sha256 -hmac 'whsec_test_secret_1'
const SECRET_1 = 'whsec_test_secret_1';
const SECRET_2 = 'whsec_test_secret_2';
const TS = '1700000000';
const BODY = Buffer.from('{"event":"review.created"}');
const SIG_1 = 'sha256=09b33d3d324f09c23e736e48b585f17b9297f1e0a4c3a8acabdb2c9e5480166b';
const SIG_2 = 'sha256=8f82edf350644bca78136a952f7898a24572acb85a03da771236861fb0263f0e';
const SIG_EMPTY = 'sha256=1255ce5be0b18d90cb33658a5bd4895f474de17cd78fe3fd952061be13ae7830';
// printf '1700000000.caf\xc3\xa9 \xe2\x82\xac\n' | openssl dgst -sha256 -hmac 'whsec_test_secret_1'
const UTF8_BODY = Buffer.from([0x63, 0x61, 0x66, 0xc3, 0xa9, 0x20, 0xe2, 0x82, 0xac, 0x0a]);
const SIG_UTF8 = 'sha256=2c26e9ea746130c96b5b4c21431027d615d5f089a337f00ae7be48cd3b188aa1';

const at = (nowSeconds: number, toleranceSeconds = 300) => ({ nowSeconds, toleranceSeconds });
const NOW = 1700000000;

describe('signDelivery', () => {
  it('matches vectors computed with OpenSSL', () => {
    expect(signDelivery(SECRET_1, TS, BODY)).toBe(SIG_1);
    expect(signDelivery(SECRET_2, TS, BODY)).toBe(SIG_2);
    expect(signDelivery(SECRET_1, TS, Buffer.alloc(0))).toBe(SIG_EMPTY);
    expect(signDelivery(SECRET_1, TS, UTF8_BODY)).toBe(SIG_UTF8);
  });
});

describe('verifyDelivery', () => {
  it('accepts a known vector and reports which secret matched and the skew', () => {
    expect(verifyDelivery({ timestamp: TS, signature: SIG_1, body: BODY }, [SECRET_1], at(NOW + 7))).toEqual({
      ok: true,
      timestamp: NOW,
      skewSeconds: 7,
      secretIndex: 0,
    });
  });

  it('verifies the raw bytes: multi-byte UTF-8 as received', () => {
    const result = verifyDelivery(
      { timestamp: TS, signature: SIG_UTF8, body: UTF8_BODY },
      [SECRET_1],
      at(NOW),
    );
    expect(result.ok).toBe(true);
  });

  it('accepts any of several secrets (rotation)', () => {
    const secrets = ['an_unrelated_secret', SECRET_1, SECRET_2];
    const one = verifyDelivery({ timestamp: TS, signature: SIG_1, body: BODY }, secrets, at(NOW));
    const two = verifyDelivery({ timestamp: TS, signature: SIG_2, body: BODY }, secrets, at(NOW));
    expect(one).toMatchObject({ ok: true, secretIndex: 1 });
    expect(two).toMatchObject({ ok: true, secretIndex: 2 });
    expect(
      verifyDelivery({ timestamp: TS, signature: SIG_2, body: BODY }, [SECRET_1], at(NOW)),
    ).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
  });

  it('refuses when there is no secret at all', () => {
    expect(verifyDelivery({ timestamp: TS, signature: SIG_1, body: BODY }, [], at(NOW))).toMatchObject({
      ok: false,
      reason: 'bad_signature',
    });
  });

  it('refuses a one-byte change of the body, the timestamp, the signature or the secret', () => {
    for (let i = 0; i < BODY.length; i++) {
      const changed = Buffer.from(BODY);
      changed[i] = changed[i]! ^ 0x01;
      expect(verifyDelivery({ timestamp: TS, signature: SIG_1, body: changed }, [SECRET_1], at(NOW)).ok).toBe(
        false,
      );
    }
    const longer = Buffer.concat([BODY, Buffer.from(' ')]);
    expect(verifyDelivery({ timestamp: TS, signature: SIG_1, body: longer }, [SECRET_1], at(NOW)).ok).toBe(
      false,
    );
    expect(
      verifyDelivery({ timestamp: '1700000001', signature: SIG_1, body: BODY }, [SECRET_1], at(NOW)),
    ).toMatchObject({ ok: false, reason: 'bad_signature' });
    const lastDigit = SIG_1.endsWith('b') ? 'c' : 'b';
    expect(
      verifyDelivery(
        { timestamp: TS, signature: SIG_1.slice(0, -1) + lastDigit, body: BODY },
        [SECRET_1],
        at(NOW),
      ),
    ).toMatchObject({ ok: false, reason: 'bad_signature' });
    expect(
      verifyDelivery({ timestamp: TS, signature: SIG_1, body: BODY }, ['whsec_test_secret_X'], at(NOW)),
    ).toMatchObject({ ok: false, reason: 'bad_signature' });
  });

  it('refuses a wrong or missing prefix, uppercase hex and truncated or padded digests', () => {
    const hex = SIG_1.slice('sha256='.length);
    for (const signature of [
      hex,
      `sha1=${hex}`,
      `SHA256=${hex}`,
      `sha256:${hex}`,
      `sha256=${hex.toUpperCase()}`,
      `sha256=${hex.slice(0, -2)}`,
      `${SIG_1}00`,
    ]) {
      expect(verifyDelivery({ timestamp: TS, signature, body: BODY }, [SECRET_1], at(NOW))).toMatchObject({
        ok: false,
        reason: 'bad_signature',
      });
    }
  });

  it('accepts a header of several signatures (a platform rotating its secret) when any one matches', () => {
    const check = (signature: string, secrets = [SECRET_1]) =>
      verifyDelivery({ timestamp: TS, signature, body: BODY }, secrets, at(NOW));
    expect(check(`${SIG_2},${SIG_1}`)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(check(`${SIG_1}, ${SIG_2}`)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(check(`${SIG_2} ${SIG_1}`)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(check(` ${SIG_2}\t${SIG_1} `)).toMatchObject({ ok: true, secretIndex: 0 });
    expect(check(`${SIG_1},${SIG_2}`, ['an_unrelated_secret', SECRET_2])).toMatchObject({
      ok: true,
      secretIndex: 1,
    });
    const others = Array.from({ length: MAX_SIGNATURES - 1 }, (_, i) => signDelivery(`other_${i}`, TS, BODY));
    expect(check([...others, SIG_1].join(','))).toMatchObject({ ok: true });
  });

  it('refuses several signatures when none matches, one is malformed, or there are too many', () => {
    const check = (signature: string) =>
      verifyDelivery({ timestamp: TS, signature, body: BODY }, [SECRET_1], at(NOW));
    const hex = SIG_1.slice('sha256='.length);
    const others = Array.from({ length: MAX_SIGNATURES }, (_, i) => signDelivery(`other_${i}`, TS, BODY));
    for (const signature of [
      `${SIG_2},${SIG_2}`,
      `${SIG_1},${hex}`,
      `${SIG_1},sha1=${hex}`,
      `${SIG_1};${SIG_2}`,
      `${SIG_1},${SIG_2.toUpperCase()}`,
      [...others, SIG_1].join(','),
      ', ,',
    ]) {
      expect(check(signature), signature).toMatchObject({ ok: false, reason: 'bad_signature' });
    }
  });

  it('names a missing signature, a missing timestamp and a malformed timestamp', () => {
    const check = (timestamp: string | undefined, signature: string | undefined) =>
      verifyDelivery({ timestamp, signature, body: BODY }, [SECRET_1], at(NOW));
    expect(check(TS, undefined)).toEqual({ ok: false, reason: 'missing_signature' });
    expect(check(TS, '')).toEqual({ ok: false, reason: 'missing_signature' });
    expect(check(undefined, SIG_1)).toEqual({ ok: false, reason: 'missing_timestamp' });
    expect(check('', SIG_1)).toEqual({ ok: false, reason: 'missing_timestamp' });
    expect(check(undefined, undefined)).toEqual({ ok: false, reason: 'missing_signature' });
    for (const ts of ['1700000000.5', '-1700000000', '17e8', 'now', '0x6553f100']) {
      expect(check(ts, SIG_1)).toEqual({ ok: false, reason: 'malformed_timestamp' });
    }
  });

  it('applies the tolerance symmetrically, boundary included', () => {
    const check = (now: number, tolerance = 300) =>
      verifyDelivery({ timestamp: TS, signature: SIG_1, body: BODY }, [SECRET_1], at(now, tolerance));
    expect(check(NOW + 300).ok).toBe(true);
    expect(check(NOW - 300).ok).toBe(true);
    expect(check(NOW + 301)).toEqual({ ok: false, reason: 'stale_timestamp', skewSeconds: 301 });
    expect(check(NOW - 301)).toEqual({ ok: false, reason: 'stale_timestamp', skewSeconds: -301 });
    expect(check(NOW + 301, 600).ok).toBe(true);
    expect(check(NOW + 1, 0)).toMatchObject({ ok: false, reason: 'stale_timestamp' });
  });

  it('checks the signature before the timestamp: a forged stale delivery is a bad signature', () => {
    expect(
      verifyDelivery({ timestamp: TS, signature: SIG_2, body: BODY }, [SECRET_1], at(NOW + 10_000)),
    ).toMatchObject({ ok: false, reason: 'bad_signature' });
  });
});
