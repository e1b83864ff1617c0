import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../src/config/schema.js';
import type { RunCounts } from '../../src/jobs/runCounts.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../src/webhooks/receiver.js';
import { fakePlatformFixture } from '../pull/helpers.js';

const URL = 'https://mirror.example.com/webhooks/review-created';
const NEW_SECRET = 'whsec_health_job_inexact_new_1';
const UNSAFE_ENTRY = `{"id":9007199254740993,"url":"${URL}","events":["review.created"],"is_active":true}`;

/**
 * The health job of `run` while the platform lists, for WEBHOOK_PUBLIC_URL, a webhook whose id is
 * a number past 2^53: it used to fail at every run on the list. It now polls as usual, holds the
 * registration back while that webhook is listed (it may be one we registered and could not
 * use), warns once, and registers at the first run after the operator deleted it.
 */
describe('the health job with a listed webhook whose id cannot be named', () => {
  let listText = `[${UNSAFE_ENTRY}]`;
  const requests: string[] = [];
  const fx = fakePlatformFixture(({ method, path }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    requests.push(method);
    if (method === 'GET') return { status: 200, body: listText };
    if (method === 'POST') {
      listText = `[{"id":"wh_new","url":"${URL}","events":["review.created"],"is_active":true}]`;
      return { status: 201, body: { webhook: { id: 'wh_new', url: URL, signing_secret: NEW_SECRET } } };
    }
    return { status: 422, body: { error: 'not expected' } };
  });
  const lines: Array<{ level: string; msg: string }> = [];
  const log = makeLogger({
    level: 'debug',
    scrubber: new SecretScrubber(),
    destination: {
      write: (line: string) => lines.push(JSON.parse(line)),
    } as unknown as NodeJS.WritableStream,
  });
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    const config = parseConfig({
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      WEBHOOK_PUBLIC_URL: URL,
      WEBHOOK_HEALTH_CRON: 'off',
    });
    receiver = await startWebhookReceiver({
      config,
      log,
      scrubber: new SecretScrubber(),
      db: fx.db,
      metrics: makeMetrics(),
      api: fx.api,
    });
  });
  afterAll(async () => {
    await receiver?.close();
  });

  const healthRun = async () => {
    const counts: RunCounts = {};
    await receiver.jobs[0]!.run(counts);
    return counts;
  };
  const levels = (prefix: string) => lines.filter((l) => l.msg.startsWith(prefix)).map((l) => l.level);

  it('polls, holds the registration back and warns once, then registers once that webhook is gone', async () => {
    for (let run = 0; run < 2; run++) {
      const counts = await healthRun();
      expect(counts).toMatchObject({ listed: 1, active: 1, inactive: 0, failing: 0 });
      expect(counts.registered).toBeUndefined();
    }
    // Ensure and the health check each list, at both runs: nothing else is sent.
    expect(requests).toEqual(['GET', 'GET', 'GET', 'GET']);
    expect(levels('listed webhook whose id cannot be named exactly')).toEqual([
      'warn',
      'debug',
      'debug',
      'debug',
    ]);
    expect(levels('WEBHOOK_PUBLIC_URL not registered')).toEqual(['warn', 'debug']);

    // Deleted by hand on the platform.
    listText = '[]';
    expect(await healthRun()).toMatchObject({ registered: 1, listed: 1, active: 1 });
    expect(receiver.secrets.current()).toEqual([NEW_SECRET]);
    requests.length = 0;
    expect(await healthRun()).toMatchObject({ listed: 1 });
    expect(requests).toEqual(['GET']);
  });
});

/**
 * A platform that answers a registration with an id past 2^53: the registration fails (its secret
 * cannot be stored under an id that may name another webhook), and the webhook it made is then
 * listed with our URL. The next runs must not register again: each would leave one more webhook
 * that nobody here can verify or delete.
 */
describe('the health job when the platform answers registrations with ids past 2^53', () => {
  const made: string[] = [];
  const fx = fakePlatformFixture(({ method, path }) => {
    if (path !== '/webhook') return { status: 404, body: { error: 'not found' } };
    if (method === 'POST') {
      made.push(UNSAFE_ENTRY);
      return {
        status: 201,
        body: `{"webhook":{"id":9007199254740993,"url":"${URL}","signing_secret":"${NEW_SECRET}"}}`,
      };
    }
    if (method === 'GET') return { status: 200, body: `[${made.join(',')}]` };
    return { status: 422, body: { error: 'not expected' } };
  });
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    const config = parseConfig({
      HTTP_HOST: '127.0.0.1',
      HTTP_PORT: '0',
      WEBHOOK_PUBLIC_URL: URL,
      WEBHOOK_HEALTH_CRON: 'off',
    });
    const log = makeLogger({ level: 'silent', scrubber: new SecretScrubber() });
    receiver = await startWebhookReceiver({
      config,
      log,
      scrubber: new SecretScrubber(),
      db: fx.db,
      metrics: makeMetrics(),
      api: fx.api,
    });
  });
  afterAll(async () => {
    await receiver?.close();
  });

  it('registers once, then waits for that webhook to be deleted by hand', async () => {
    const run = () => receiver.jobs[0]!.run({});
    await expect(run()).rejects.toThrow(/webhook\.id: is a number past 2\^53.*delete it by hand/);
    for (let i = 0; i < 3; i++) await run();
    expect(made).toHaveLength(1);
    expect(receiver.secrets.current()).toEqual([]);
  });
});
