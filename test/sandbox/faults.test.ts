import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SandboxControl } from '../../src/sandbox/controlClient.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { partner } from './helpers.js';

type Call = ReturnType<typeof partner>;

describe('fault injection on partner requests', () => {
  let sandbox: TestSandbox;
  let control: SandboxControl;
  let api: Call;

  beforeAll(async () => {
    sandbox = await testSandbox({ seedReviews: 300 });
    ({ control } = sandbox);
    api = partner(sandbox, sandbox.apiKey);
  });
  afterEach(() => control.setFaults({}));
  afterAll(() => sandbox.close());

  it('honours the fractions of 500, 429 (with Retry-After) and truncated answers', async () => {
    await control.setFaults({
      partner: { error500: 0.3, error429: 0.2, truncated: 0.1, retryAfterSeconds: 7 },
    });
    const counts = { 200: 0, 500: 0, 429: 0, truncated: 0 };
    const n = 500;
    for (let i = 0; i < n; i++) {
      const answer = await api('GET', '/reviews?limit=20');
      if (answer.status === 429) {
        expect(answer.headers.get('retry-after')).toBe('7');
        expect(answer.json).toEqual({ error: expect.any(String) });
        counts[429]++;
      } else if (answer.status === 500) {
        expect(answer.json).toEqual({ error: expect.any(String) });
        counts[500]++;
      } else {
        expect(answer.status).toBe(200);
        if (answer.json === undefined) counts.truncated++;
        else counts[200]++;
      }
    }
    expect(counts[500] / n).toBeCloseTo(0.3, 1);
    expect(counts[429] / n).toBeCloseTo(0.2, 1);
    expect(counts.truncated / n).toBeCloseTo(0.1, 1);
    expect(counts[200] / n).toBeCloseTo(0.4, 1);
    const requests = await control.requests();
    expect(requests.by_route['GET /api/v1/partner/reviews']).toMatchObject({
      429: counts[429],
      500: counts[500],
    });
  });

  it('answers 503 with a Retry-After only when one is asked for', async () => {
    await control.setFaults({ partner: { error503: 1 } });
    const bare = await api('GET', '/reviews?limit=1');
    expect(bare.status).toBe(503);
    expect(bare.headers.get('retry-after')).toBeNull();
    expect(bare.json).toEqual({ error: expect.any(String) });
    await control.setFaults({ partner: { error503: 1, retryAfterSeconds: 600 } });
    const timed = await api('GET', '/reviews?limit=1');
    expect(timed.status).toBe(503);
    expect(timed.headers.get('retry-after')).toBe('600');
  });

  it('writes the Retry-After of a 429 or 503 in the form asked for: seconds, an HTTP date, or none', async () => {
    await control.setFaults({ partner: { error429: 1, retryAfterSeconds: 90, retryAfterForm: 'seconds' } });
    expect((await api('GET', '/reviews?limit=1')).headers.get('retry-after')).toBe('90');

    await control.setFaults({ partner: { error429: 1, retryAfterSeconds: 90, retryAfterForm: 'http-date' } });
    const before = Date.now();
    const dated = await api('GET', '/reviews?limit=1');
    const after = Date.now();
    expect(dated.status).toBe(429);
    const date = dated.headers.get('retry-after')!;
    expect(date).toMatch(/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/);
    // Never earlier than asked; at most the second an HTTP date cannot tell apart later.
    expect(Date.parse(date)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 + 90_000);
    expect(Date.parse(date)).toBeLessThanOrEqual(Math.ceil(after / 1000) * 1000 + 90_000);

    await control.setFaults({ partner: { error429: 1, retryAfterForm: 'absent' } });
    const bare = await api('GET', '/reviews?limit=1');
    expect(bare.status).toBe(429);
    expect(bare.headers.get('retry-after')).toBeNull();

    await control.setFaults({ partner: { error503: 1, retryAfterSeconds: 30, retryAfterForm: 'http-date' } });
    const down = await api('GET', '/reviews?limit=1');
    expect(down.status).toBe(503);
    expect(Date.parse(down.headers.get('retry-after')!)).toBeGreaterThan(Date.now());
    await control.setFaults({ partner: { error503: 1, retryAfterForm: 'http-date' } });
    expect((await api('GET', '/reviews?limit=1')).headers.get('retry-after')).toBeNull();
  });

  it('cuts a truncated answer in half', async () => {
    const whole = await api('GET', '/reviews?limit=10');
    await control.setFaults({ partner: { truncated: 1 } });
    const cut = await api('GET', '/reviews?limit=10');
    expect(cut.status).toBe(200);
    expect(cut.json).toBeUndefined();
    expect(whole.text.startsWith(cut.text)).toBe(true);
    expect(cut.text.length).toBe(Math.floor(whole.text.length / 2));
  });

  it('restricts faults to route prefixes and never touches the control API', async () => {
    await control.setFaults({ partner: { error500: 1, routes: ['/api/v1/partner/locations'] } });
    expect((await api('GET', '/locations')).status).toBe(500);
    expect((await api('GET', '/reviews')).status).toBe(200);
    await control.setFaults({ partner: { error500: 1 } });
    expect((await api('GET', '/reviews')).status).toBe(500);
    expect((await control.truth(sandbox.companyId)).reviews).toHaveLength(300);
    // A 500 from the fault layer happens before the handler: nothing was created.
    expect((await api('POST', '/locations', { name: 'Never' })).status).toBe(500);
    expect((await control.truth(sandbox.companyId)).locations).toHaveLength(0);
  });

  it('delays answers', async () => {
    await control.setFaults({ partner: { delay: 1, delayMs: 150 } });
    const started = Date.now();
    expect((await api('GET', '/reviews?limit=1')).status).toBe(200);
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
  });

  it('hangs until the client gives up, and counts the hang', async () => {
    await control.setFaults({ partner: { hang: 1 } });
    const started = Date.now();
    await expect(
      fetch(`${sandbox.url}/api/v1/partner/reviews`, {
        headers: { 'x-api-key': sandbox.apiKey },
        signal: AbortSignal.timeout(300),
      }),
    ).rejects.toThrow();
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await control.setFaults({});
    expect((await api('GET', '/reviews?limit=1')).status).toBe(200);
    expect((await control.requests()).by_route['GET /api/v1/partner/reviews']?.hang).toBe(1);
  });

  it('rejects invalid fault settings', async () => {
    for (const faults of [
      { partner: { error500: 2 } },
      { partner: { error500: 0.6, hang: 0.6 } },
      { nope: true },
    ]) {
      const response = await fetch(`${sandbox.url}/_sandbox/faults`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(faults),
      });
      expect(response.status, JSON.stringify(faults)).toBe(422);
    }
  });
});

describe('close() with a hung request', () => {
  it('returns promptly and ends the hung socket', async () => {
    const sandbox = await testSandbox();
    const { control } = sandbox;
    await control.setFaults({ partner: { hang: 1 } });
    const pending = fetch(`${sandbox.url}/api/v1/partner/reviews`, {
      headers: { 'x-api-key': sandbox.apiKey },
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = Date.now();
    await sandbox.close();
    expect(Date.now() - started).toBeLessThan(2000);
    await expect(pending).rejects.toThrow();
  });
});
