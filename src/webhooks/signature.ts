import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * Signature verification of a delivery (spec 6.3), pure: no clock, no I/O. The HMAC is computed
 * over the raw bytes of the body as received, never over a re-serialised JSON value.
 */

const PREFIX = 'sha256=';
// Exactly what the spec writes: the prefix and 64 lowercase hex digits. Anything else cannot match.
const SIGNATURE_FORMAT = /^sha256=[0-9a-f]{64}$/;
/**
 * Signatures one header may carry: a platform rotating its secret signs with the old and the new
 * one ("sha256=…,sha256=…" or space-separated). Each costs a comparison per secret; more than a
 * rotation needs is no delivery we expect, so it is refused rather than compared.
 */
export const MAX_SIGNATURES = 8;
const SIGNATURE_SEPARATORS = /[\s,]+/;
const TIMESTAMP_FORMAT = /^[0-9]{1,15}$/;

export type RefusalReason =
  | 'missing_signature'
  | 'missing_timestamp'
  | 'malformed_timestamp'
  | 'bad_signature'
  | 'stale_timestamp';

export type VerifyResult =
  | {
      readonly ok: true;
      /** Unix seconds from X-EE-Timestamp. */
      readonly timestamp: number;
      /** now - timestamp in seconds: positive when the delivery was signed in our past. */
      readonly skewSeconds: number;
      /** Which of the secrets matched (rotation: tells an operator the old one is still in use). */
      readonly secretIndex: number;
    }
  | {
      readonly ok: false;
      readonly reason: RefusalReason;
      /** Present once the timestamp could be read. */
      readonly skewSeconds?: number;
    };

export interface SignedRequest {
  /** The X-EE-Timestamp header, as received. */
  readonly timestamp: string | undefined;
  /** The X-EE-Signature header, as received. */
  readonly signature: string | undefined;
  /** The raw request body. */
  readonly body: Buffer;
}

export interface VerifyOptions {
  /** Current Unix time in seconds (the caller owns the clock). */
  readonly nowSeconds: number;
  /** Largest accepted |now - timestamp|, in seconds. */
  readonly toleranceSeconds: number;
}

/** `sha256=` + lowercase hex HMAC-SHA256 of `timestamp + "." + body`, keyed with `secret`. */
export function signDelivery(secret: string, timestamp: string, body: Buffer | string): string {
  const hmac = createHmac('sha256', secret);
  hmac.update(`${timestamp}.`);
  hmac.update(body);
  return PREFIX + hmac.digest('hex');
}

/** The headers of a signed review.created delivery (spec 6.2), as a sender (a test, a benchmark) sets them. */
export function deliveryHeaders(secret: string, timestamp: string, body: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-ee-event': 'review.created',
    'x-ee-timestamp': timestamp,
    'x-ee-signature': signDelivery(secret, timestamp, body),
  };
}

/**
 * The signatures of an X-EE-Signature header, or undefined when it is malformed: more than
 * MAX_SIGNATURES, or any one of them not in the spec's exact form.
 */
function signaturesOf(header: string): string[] | undefined {
  // The usual header holds one signature: no split for it.
  if (SIGNATURE_FORMAT.test(header)) return [header];
  const signatures = header.split(SIGNATURE_SEPARATORS).filter((s) => s !== '');
  if (signatures.length > MAX_SIGNATURES) return undefined;
  return signatures.every((s) => SIGNATURE_FORMAT.test(s)) ? signatures : undefined;
}

/**
 * Accepts the delivery when one of its signatures (see signaturesOf) matches any of `secrets`
 * (several are valid while a secret is rotated, here or on the platform) and its timestamp is
 * within the tolerance in either direction. The signature is checked first so that only authentic
 * deliveries are ever told about their timestamp.
 */
export function verifyDelivery(
  request: SignedRequest,
  secrets: readonly string[],
  options: VerifyOptions,
): VerifyResult {
  const signature = request.signature?.trim();
  const timestampText = request.timestamp?.trim();
  if (signature === undefined || signature === '') return { ok: false, reason: 'missing_signature' };
  if (timestampText === undefined || timestampText === '') return { ok: false, reason: 'missing_timestamp' };
  if (!TIMESTAMP_FORMAT.test(timestampText)) return { ok: false, reason: 'malformed_timestamp' };
  const timestamp = Number(timestampText);
  const skewSeconds = options.nowSeconds - timestamp;

  const signatures = signaturesOf(signature);
  if (signatures === undefined) return { ok: false, reason: 'bad_signature', skewSeconds };
  const received = signatures.map((s) => Buffer.from(s, 'latin1'));
  let secretIndex = -1;
  // Every secret is tried against every signature even after a match, so the time taken does not
  // tell which one matched. Each comparison is of equal lengths (the format fixes them).
  secrets.forEach((secret, index) => {
    const expected = Buffer.from(signDelivery(secret, timestampText, request.body), 'latin1');
    for (const candidate of received) {
      if (timingSafeEqual(expected, candidate) && secretIndex === -1) secretIndex = index;
    }
  });
  if (secretIndex === -1) return { ok: false, reason: 'bad_signature', skewSeconds };

  if (Math.abs(skewSeconds) > options.toleranceSeconds) {
    return { ok: false, reason: 'stale_timestamp', skewSeconds };
  }
  return { ok: true, timestamp, skewSeconds, secretIndex };
}
