import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { Inbox } from '../../src/webhooks/inbox.js';
import { makeWebhookServer } from '../../src/webhooks/server.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { makeReview, signedDelivery } from './helpers.js';

const KNOWN_SECRET = 'whsec_receiver_clock_known_1';
const NEW_SECRET = 'whsec_receiver_clock_new_1';
const PATH = '/webhooks/review-created';
const TOLERANCE_SECONDS = 300;
/** How long the reload of the secrets takes: the receiver bounds it by the commit timeout (5 s). */
const RELOAD_SECONDS = 5;

/**
 * A delivery signed with a secret just stored by another process makes the receiver reload the
 * secrets before it can verify it. That wait is ours, not the delivery's age: its timestamp is
 * judged at its arrival.
 */
describe('the timestamp tolerance of a delivery that waits for a reload of the secrets', () => {
  let db: Db;
  let inbox: Inbox;
  let app: FastifyInstance;
  let url: string;
  let clock = 2_000_000_000;
  let secrets = [KNOWN_SECRET];

  beforeAll(async () => {
    db = await freshDb();
    inbox = new Inbox({ db, log: quietLog });
    app = makeWebhookServer({
      path: PATH,
      toleranceSeconds: TOLERANCE_SECONDS,
      maxBodyBytes: 64 * 1024,
      secrets: () => secrets,
      // A slow reload, on the receiver's clock: it finds the new secret after RELOAD_SECONDS.
      reloadSecrets: async () => {
        clock += RELOAD_SECONDS;
        secrets = [NEW_SECRET, KNOWN_SECRET];
        return true;
      },
      inbox,
      log: quietLog,
      nowSeconds: () => clock,
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    url = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}${PATH}`;
  });
  afterAll(async () => {
    await app?.close();
    await inbox?.close();
    await db?.close();
  });

  it('accepts one within the tolerance when it arrived, and dates it by that time at the latest', async () => {
    const review = makeReview();
    const signedAt = clock - TOLERANCE_SECONDS + 2;
    const d = signedDelivery(NEW_SECRET, review, { timestamp: signedAt });
    const res = await fetch(url, { method: 'POST', headers: d.headers, body: d.body });
    expect(await res.json()).toEqual({ status: 'accepted' });
    const row = await db.knex(db.table('reviews')).where({ id: review.id }).first();
    expect(row.observed_at.getTime()).toBe(signedAt * 1000);
  });

  it('still refuses one already past the tolerance when it arrived', async () => {
    secrets = [KNOWN_SECRET];
    const review = makeReview();
    const d = signedDelivery(NEW_SECRET, review, { timestamp: clock - TOLERANCE_SECONDS - 1 });
    const res = await fetch(url, { method: 'POST', headers: d.headers, body: d.body });
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: 'stale_timestamp' });
    expect(await db.knex(db.table('reviews')).where({ id: review.id }).first()).toBeUndefined();
  });
});
