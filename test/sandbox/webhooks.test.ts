import { createHmac, timingSafeEqual } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { partner, type Received, startReceiver } from './helpers.js';

/** Spec 6.3, computed independently of the sandbox's code. */
function verify(secret: string, received: Received): boolean {
  const timestamp = received.headers['x-ee-timestamp'] as string;
  const expected = Buffer.from(
    `sha256=${createHmac('sha256', secret).update(`${timestamp}.${received.rawBody}`).digest('hex')}`,
  );
  const given = Buffer.from(String(received.headers['x-ee-signature']));
  return given.length === expected.length && timingSafeEqual(given, expected);
}

describe('webhooks', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  const receivers: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    sandbox = await testSandbox({
      timeScale: 0.001,
      allowHttpWebhooks: true,
      deliveryTimeoutMs: 300,
    });
    ({ control } = sandbox);
  });
  afterAll(async () => {
    await sandbox.close();
    await Promise.all(receivers.map((r) => r.close()));
  });

  /** A fresh company with one webhook pointing at a fresh receiver. */
  async function setup(respond?: Parameters<typeof startReceiver>[0]) {
    const receiver = await startReceiver(respond);
    receivers.push(receiver);
    const company = await control.createCompany();
    const api = partner(sandbox, company.api_key);
    const registered = await api('POST', '/webhook', { url: receiver.url, events: ['review.created'] });
    expect(registered.status).toBe(201);
    return { receiver, company, api, webhook: registered.json.webhook };
  }

  it('registers HTTPS endpoints only (HTTP on localhost with the sandbox flag) for review.created', async () => {
    const api = partner(sandbox, sandbox.apiKey);
    const ok = await api('POST', '/webhook', {
      url: 'https://hooks.example.com/reviews',
      events: ['review.created'],
      description: 'CRM',
    });
    expect(ok.status).toBe(201);
    expect(ok.json).toEqual({
      webhook: {
        id: expect.any(String),
        url: 'https://hooks.example.com/reviews',
        events: ['review.created'],
        is_active: true,
        created_at: expect.stringMatching(/Z$/),
        signing_secret: expect.stringMatching(/^whsec_[0-9a-f]{64}$/),
      },
    });
    for (const body of [
      { url: 'http://hooks.example.com/reviews', events: ['review.created'] },
      { url: 'ftp://127.0.0.1/x', events: ['review.created'] },
      { url: 'not a url', events: ['review.created'] },
      { events: ['review.created'] },
      { url: 'https://hooks.example.com' },
      { url: 'https://hooks.example.com', events: [] },
      { url: 'https://hooks.example.com', events: ['review.updated'] },
      { url: 'https://hooks.example.com', events: 'review.created' },
    ]) {
      const answer = await api('POST', '/webhook', body);
      expect(answer.status, JSON.stringify(body)).toBe(422);
      expect(answer.json.error).toEqual(expect.any(String));
    }
    expect(
      (await api('POST', '/webhook', { url: 'http://localhost:9/x', events: ['review.created'] })).status,
    ).toBe(201);

    const strict = await testSandbox();
    try {
      const refused = await partner(strict, strict.apiKey)('POST', '/webhook', {
        url: 'http://127.0.0.1:9/x',
        events: ['review.created'],
      });
      expect(refused.status).toBe(422);
    } finally {
      await strict.close();
    }
  });

  it('lists with last_error and never the secret; deletes by ?id=', async () => {
    const company = await control.createCompany();
    const api = partner(sandbox, company.api_key);
    const created = (
      await api('POST', '/webhook', { url: 'https://a.example.com', events: ['review.created'] })
    ).json.webhook;
    const list = await api('GET', '/webhook');
    expect(list.status).toBe(200);
    expect(list.json).toEqual({
      webhooks: [
        {
          id: created.id,
          url: 'https://a.example.com',
          events: ['review.created'],
          is_active: true,
          created_at: created.created_at,
          description: null,
          last_error: null,
        },
      ],
    });
    expect(list.text).not.toContain(created.signing_secret);
    const stranger = await control.createCompany();
    expect((await partner(sandbox, stranger.api_key)('DELETE', `/webhook?id=${created.id}`)).status).toBe(
      404,
    );
    expect((await api('DELETE', '/webhook')).status).toBe(422);
    const deleted = await api('DELETE', `/webhook?id=${created.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({ deleted: true });
    expect((await api('DELETE', `/webhook?id=${created.id}`)).status).toBe(404);
    expect((await api('GET', '/webhook')).json.webhooks).toEqual([]);
  });

  it('delivers a signed review.created that verifies with an independent HMAC', async () => {
    const { receiver, company, webhook } = await setup();
    const [review] = await control.submitReviews(company.company_id, [
      { rating: 4.5, comment: 'Signed 🎉 "ok"\n' },
    ]);
    await control.submitReviews(company.company_id, [{ public: false }, { suppressed: true }]);
    const delivery = await waitFor(() => receiver.received[0]);
    expect(delivery.headers['content-type']).toBe('application/json');
    expect(delivery.headers['x-ee-event']).toBe('review.created');
    const timestamp = delivery.headers['x-ee-timestamp'] as string;
    expect(timestamp).toMatch(/^\d+$/);
    expect(Math.abs(Number(timestamp) - Date.now() / 1000)).toBeLessThan(300);
    expect(delivery.headers['x-ee-signature']).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(verify(webhook.signing_secret, delivery)).toBe(true);
    expect(verify('whsec_wrong', delivery)).toBe(false);
    expect(JSON.parse(delivery.rawBody)).toEqual({ event: 'review.created', timestamp, data: review });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(receiver.received).toHaveLength(1);
    const truth = await control.truth(company.company_id);
    expect(truth.deliveries).toMatchObject([
      { review_id: review!.id, state: 'delivered', attempts: [{ status: 200 }] },
    ]);
  });

  it('retries after 1, 5 and 30 minutes (scaled), re-signing each time, then drops and records last_error', async () => {
    const { receiver, company, api, webhook } = await setup(() => 500);
    const [review] = await control.submitReviews(company.company_id, [{}]);
    const truth = await waitFor(async () => {
      const t = await control.truth(company.company_id);
      return t.deliveries[0]?.state === 'dropped' ? t : undefined;
    });
    expect(receiver.received).toHaveLength(4);
    const gaps = receiver.received.slice(1).map((r, i) => r.at - receiver.received[i]!.at);
    const expected = [60, 300, 1800];
    gaps.forEach((gap, i) => {
      expect(gap).toBeGreaterThanOrEqual(expected[i]! - 5);
      expect(gap).toBeLessThan(expected[i]! + 1000);
    });
    for (const r of receiver.received) {
      expect(verify(webhook.signing_secret, r)).toBe(true);
      expect(JSON.parse(r.rawBody).data.id).toBe(review!.id);
    }
    expect(truth.deliveries[0]!.attempts.map((a) => a.status)).toEqual([500, 500, 500, 500]);
    const listed = (await api('GET', '/webhook')).json.webhooks[0];
    expect(listed.last_error).toMatch(/^HTTP 500 at \d{4}-\d{2}-\d{2}T/);
    expect(truth.webhooks[0]!.last_error).toBe(listed.last_error);
  });

  it('stops retrying once an attempt succeeds, and treats a slow receiver as a timeout', async () => {
    const flaky = await setup((_r, index) => (index < 2 ? 503 : 204));
    await control.submitReviews(flaky.company.company_id, [{}]);
    const delivered = await waitFor(async () => {
      const t = await control.truth(flaky.company.company_id);
      return t.deliveries[0]?.state === 'delivered' ? t.deliveries[0] : undefined;
    });
    expect(delivered.attempts.map((a) => a.status)).toEqual([503, 503, 204]);
    expect((await flaky.api('GET', '/webhook')).json.webhooks[0].last_error).toBeNull();

    const slow = await setup((_r, index) => (index === 0 ? 'hang' : 200));
    await control.submitReviews(slow.company.company_id, [{}]);
    const recovered = await waitFor(async () => {
      const t = await control.truth(slow.company.company_id);
      return t.deliveries[0]?.state === 'delivered' ? t.deliveries[0] : undefined;
    });
    expect(recovered.attempts[0]).toMatchObject({ status: null, error: 'timeout' });
    expect(recovered.attempts[1]).toMatchObject({ status: 200, error: null });
  });

  it('records a dropped delivery to an unreachable endpoint', async () => {
    const company = await control.createCompany();
    const api = partner(sandbox, company.api_key);
    await api('POST', '/webhook', { url: 'http://127.0.0.1:1/nothing', events: ['review.created'] });
    await control.submitReviews(company.company_id, [{}]);
    const listed = await waitFor(async () => {
      const hook = (await api('GET', '/webhook')).json.webhooks[0];
      return hook.last_error === null ? undefined : hook;
    });
    expect(listed.last_error).toMatch(/^connection error/);
  });

  describe('faults', () => {
    afterAll(() => control.setFaults({}));

    it('fails the first N attempts without sending them', async () => {
      const { receiver, company } = await setup();
      await control.setFaults({ webhooks: { failFirst: 2 } });
      await control.submitReviews(company.company_id, [{}]);
      const delivery = await waitFor(async () => {
        const t = await control.truth(company.company_id);
        return t.deliveries[0]?.state === 'delivered' ? t.deliveries[0] : undefined;
      });
      expect(delivery.attempts.map((a) => a.status)).toEqual([null, null, 200]);
      expect(receiver.received).toHaveLength(1);
      await control.setFaults({});
    });

    it('duplicates and reorders deliveries', async () => {
      const { receiver, company, webhook } = await setup();
      await control.setFaults({ webhooks: { duplicate: 1, reorder: true } });
      const reviews = await control.submitReviews(company.company_id, [{}, {}, {}]);
      await waitFor(() => (receiver.received.length >= 6 ? true : undefined));
      const ids = receiver.received.map((r) => JSON.parse(r.rawBody).data.id);
      const [a, b, c] = reviews.map((r) => r.id);
      expect(ids).toEqual([c, c, b, b, a, a]);
      for (const r of receiver.received) expect(verify(webhook.signing_secret, r)).toBe(true);
      const truth = await control.truth(company.company_id);
      expect(truth.deliveries.filter((d) => d.duplicate_of !== null)).toHaveLength(3);
      await control.setFaults({});
    });
  });
});
