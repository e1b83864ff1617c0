import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MirrorGauges } from '../../src/admin/mirrorGauges.js';
import { parseConfig } from '../../src/config/schema.js';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { runJob } from '../../src/jobs/runner.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import { makePartnerApi, type PartnerApi, partnerApiOptions } from '../../src/partner-api/client.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../src/webhooks/receiver.js';
import { signDelivery } from '../../src/webhooks/signature.js';
import { markWebhookDeleted, readWebhookMissRate, saveRegistration } from '../../src/webhooks/webhooksSql.js';
import { freshDb } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';

/** The receiver of `run`, in process, against the sandbox delivering over real HTTP. */
describe('webhook receiver with the sandbox delivering', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let db: Db;
  let api: PartnerApi;
  let receiver: WebhookReceiver;
  const metrics = makeMetrics();
  const scrubber = new SecretScrubber();
  const log = makeLogger({ level: 'silent', scrubber });

  beforeAll(async () => {
    sandbox = await testSandbox({ timeScale: 0.001, allowHttpWebhooks: true });
    ({ control } = sandbox);
    db = await freshDb();
    const config = parseConfig({
      REVIEWS_API_URL: sandbox.url,
      REVIEWS_API_KEY: sandbox.apiKey,
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      WEBHOOK_HEALTH_CRON: 'off',
    });
    api = makePartnerApi(partnerApiOptions(config, log));
    receiver = await startWebhookReceiver({ config, log, scrubber, db, metrics, api });
  });
  afterAll(async () => {
    await sandbox?.close();
    await receiver?.close();
    await api?.close();
    await db?.close();
  });

  const storedIds = async () =>
    new Set((await db.knex(db.table('reviews')).select('id')).map((r: { id: string }) => r.id));
  const deliveriesOf = async (reviewIds: readonly string[]) => {
    const wanted = new Set(reviewIds);
    return (await control.truth(sandbox.companyId)).deliveries.filter((d) => wanted.has(d.review_id));
  };
  /** Registers like `webhooks register` does: the secret goes to the database. */
  const register = async (url: string, options: { reload?: boolean } = {}) => {
    const webhook = await api.webhooks.register({ url, description: 'test' });
    await saveRegistration(db.knex, db, webhook);
    if (options.reload !== false) await receiver.secrets.refresh(db);
    return webhook;
  };
  const unregister = async (id: string) => {
    await api.webhooks.delete(id);
    await markWebhookDeleted(db.knex, db, id);
  };

  it('has the review in the table once the sandbox saw its 200', async () => {
    const webhook = await register(receiver.url);
    const [review] = await control.submitReviews(sandbox.companyId, [{ comment: 'first by webhook' }]);
    await waitFor(async () => (await deliveriesOf([review!.id])).some((d) => d.state !== 'pending'));
    const [delivery] = await deliveriesOf([review!.id]);
    // The first attempt failed only if the stored secret was not yet loaded: it is reloaded then.
    expect(delivery!.state).toBe('delivered');
    const row = await db.knex(db.table('reviews')).where({ id: review!.id }).first();
    expect(row).toMatchObject({ source: 'webhook', comment: 'first by webhook' });
    await unregister(webhook.id);
  });

  it('lands 1,000 deliveries with duplicates and reordering as exactly the right rows', async () => {
    const webhook = await register(receiver.url);
    await control.setFaults({ webhooks: { duplicate: 0.1, reorder: true } });
    try {
      // Forty submissions at once: forty chains of deliveries arrive concurrently.
      const chunks = await Promise.all(
        Array.from({ length: 40 }, (_, c) =>
          control.submitReviews(
            sandbox.companyId,
            Array.from({ length: 25 }, (_, i) => ({ comment: `burst ${c}-${i}`, rating: 1 + ((c + i) % 5) })),
          ),
        ),
      );
      const submitted = chunks.flat();
      const ids = submitted.map((r) => r.id);
      await waitFor(async () => (await deliveriesOf(ids)).every((d) => d.state === 'delivered'), 60_000);
      const deliveries = await deliveriesOf(ids);
      expect(deliveries.filter((d) => d.duplicate_of !== null).length).toBeGreaterThan(0);

      const rows = await db.knex(db.table('reviews')).whereIn('id', ids).orderBy('id');
      expect(rows).toHaveLength(1000);
      const byId = new Map(submitted.map((r) => [r.id, r]));
      for (const row of rows) {
        const review = byId.get(row.id)!;
        expect({ comment: row.comment, rating: Number(row.rating), number: row.review_number }).toEqual({
          comment: review.comment,
          rating: review.rating,
          number: review.review_number,
        });
        expect(row.source).toBe('webhook');
      }
      const inbox = await db.knex(db.table('webhook_inbox')).whereIn('review_id', ids).count({ n: '*' });
      expect(Number(inbox[0]!.n)).toBe(1000);
    } finally {
      await control.setFaults({});
      await unregister(webhook.id);
    }
  });

  it('accepts both secrets during a rotation and refuses the old one after it', async () => {
    const old = await register(receiver.url);
    const [a] = await control.submitReviews(sandbox.companyId, [{ comment: 'before rotation' }]);
    // As `webhooks register` in another process: the receiver reloads the secrets on demand.
    const fresh = await register(receiver.url, { reload: false });
    const [b] = await control.submitReviews(sandbox.companyId, [{ comment: 'during rotation' }]);
    await waitFor(async () => (await deliveriesOf([a!.id, b!.id])).every((d) => d.state === 'delivered'));
    // During the rotation each review is delivered by both webhooks, each signed with its own secret.
    const during = await deliveriesOf([b!.id]);
    expect(new Set(during.map((d) => d.webhook_id))).toEqual(new Set([old.id, fresh.id]));

    await unregister(old.id);
    await receiver.secrets.refresh(db);
    const [c] = await control.submitReviews(sandbox.companyId, [{ comment: 'after rotation' }]);
    await waitFor(async () => (await deliveriesOf([c!.id])).every((d) => d.state === 'delivered'));
    for (const id of [a!.id, b!.id, c!.id]) expect((await storedIds()).has(id)).toBe(true);

    // A delivery still signed with the old secret is now refused.
    const timestamp = String(Math.floor(Date.now() / 1000));
    const body = JSON.stringify({ event: 'review.created', timestamp, data: { ...a, comment: 'forged' } });
    const refused = await fetch(receiver.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-ee-timestamp': timestamp,
        'x-ee-signature': signDelivery(old.signing_secret, timestamp, body),
      },
      body,
    });
    expect(refused.status).toBe(401);
    expect((await db.knex(db.table('reviews')).where({ id: a!.id }).first()).comment).toBe('before rotation');
    await unregister(fresh.id);
  });

  it('surfaces last_error of a webhook whose deliveries were dropped, in the table and the gauges', async () => {
    const broken = await register(`${receiver.url}-nowhere`); // 404 on every attempt
    const [review] = await control.submitReviews(sandbox.companyId, [{ comment: 'dropped' }]);
    // With time scaled down, the retries after 1, 5 and 30 minutes take about two seconds.
    await waitFor(async () => (await deliveriesOf([review!.id])).every((d) => d.state === 'dropped'), 30_000);
    const [delivery] = await deliveriesOf([review!.id]);
    expect(delivery!.attempts).toHaveLength(4);

    // The health job as the daemon runs it: its run records what it saw, the gauges read that.
    const health = receiver.jobs.find((job) => job.name === JOB.webhookHealth)!;
    const run = await runJob({ db, log, metrics }, health, { wait: false });
    expect(run.counts).toMatchObject({ listed: 1, active: 0, inactive: 0, failing: 1 });
    const row = await db.knex(db.table('webhooks')).where({ id: broken.id }).first();
    expect(row.last_error).toMatch(/HTTP 404/);
    expect(row.checked_at).not.toBeNull();
    expect(await new MirrorGauges({ db, log, metrics }).refresh()).toBe(true);
    const gauge = (await metrics.webhooks.get()).values.find((v) => v.labels.state === 'failing');
    expect(gauge?.value).toBe(1);
    // Nothing of the dropped delivery reached the table: the poll is what fills this gap.
    expect((await storedIds()).has(review!.id)).toBe(false);
    await unregister(broken.id);
    expect((await api.webhooks.list()).map((w) => w.id)).not.toContain(broken.id);
  });
  it('leaves the poll as the source of truth: it confirms webhook rows and fills in dropped ones', async () => {
    const visible = await control.visibleReviews(sandbox.companyId);
    const before = await storedIds();
    const missing = visible.filter((r) => !before.has(r.id));
    // The delivery dropped by the previous test.
    expect(missing.map((r) => r.comment)).toEqual(['dropped']);

    await syncReviews({ db, api, log, overlapMs: 600_000, detailConcurrency: 1 }, {});
    const rows = await db.knex(db.table('reviews')).select('id', 'source', 'feed_seen_at');
    expect(rows).toHaveLength(visible.length);
    expect(rows.every((r: { feed_seen_at: Date | null }) => r.feed_seen_at !== null)).toBe(true);
    const bySource = (source: string) => rows.filter((r: { source: string }) => r.source === source).length;
    expect(bySource('feed')).toBe(1);
    expect(bySource('webhook')).toBe(visible.length - 1);
    const miss = await readWebhookMissRate(db.knex, db);
    expect(miss).toEqual({ feed: 1, webhook: visible.length - 1, ratio: 1 / visible.length });
  });
});
