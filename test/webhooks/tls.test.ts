import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/schema.js';
import type { Db } from '../../src/db/connect.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../src/webhooks/receiver.js';
import { freshDb } from '../helpers/db.js';
import { makeReview, signedDelivery } from './helpers.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const SECRET = 'whsec_tls_test_secret';

/** TLS_CERT_FILE and TLS_KEY_FILE: the receiver terminates TLS itself (a self-signed test certificate). */
describe('webhook receiver over HTTPS', () => {
  let db: Db;
  let receiver: WebhookReceiver;
  const scrubber = new SecretScrubber();
  const log = makeLogger({ level: 'silent', scrubber });
  const metrics = makeMetrics();

  beforeAll(async () => {
    db = await freshDb();
    const config = parseConfig({
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      WEBHOOK_SECRETS: SECRET,
      TLS_CERT_FILE: fixture('cert.pem'),
      TLS_KEY_FILE: fixture('key.pem'),
    });
    receiver = await startWebhookReceiver({ config, log, scrubber, db, metrics, api: undefined });
  });
  afterAll(async () => {
    await receiver?.close();
    await db?.close();
  });

  it('accepts a signed delivery over HTTPS', async () => {
    expect(receiver.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+\/webhooks\/review-created$/);
    const agent = new Agent({ connect: { ca: readFileSync(fixture('cert.pem')) } });
    const review = makeReview();
    const d = signedDelivery(SECRET, review);
    const res = await request(receiver.url, {
      method: 'POST',
      headers: d.headers,
      body: d.body,
      dispatcher: agent,
    });
    expect(res.statusCode).toBe(200);
    expect(await res.body.json()).toEqual({ status: 'accepted' });
    expect(await db.knex(db.table('reviews')).where({ id: review.id }).first()).toBeDefined();
    await agent.close();
  });

  it('adds the configured secrets to the log scrubber', () => {
    expect(scrubber.scrub(`x ${SECRET} y`)).toBe('x [REDACTED] y');
  });
});
