import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { JOB } from '../../src/jobs/jobNames.js';
import { runJob } from '../../src/jobs/runner.js';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { ApiRequestError, ApiUnavailableError } from '../../src/partner-api/errors.js';
import { keyScrubber } from '../../src/partner-api/http.js';
import { syncReviews } from '../../src/pull/syncReviews.js';
import { freshDb } from '../helpers/db.js';
import { type FakePlatform, startFakePlatform } from '../helpers/fakePlatform.js';
import { pullContext, testApi } from '../pull/helpers.js';

// Characters that URL-encoding changes, so both forms of the key are exercised.
const KEY = 'rm_live_S3cr3t+key/with=chars';
const ENCODED = encodeURIComponent(KEY);

/** Everything an error carries that could be printed: message, stack, causes, fields. */
const everything = (value: unknown) => inspect(value, { depth: 10 }) + JSON.stringify(value ?? null);

/** Issue 9 item 7: a platform echoing the API key back must not get it printed or stored. */
describe('a platform that echoes the API key', () => {
  let platform: FakePlatform;
  let api: PartnerApi;
  let db: Db;
  const logged: string[] = [];
  beforeAll(async () => {
    platform = await startFakePlatform(({ path }) => {
      const echo = `unknown parameter for api key ${KEY} (sent as ${ENCODED})`;
      if (path === '/reviews') return { status: 400, body: { error: echo } };
      if (path === '/professionals/p') return { status: 500, body: { error: echo } };
      if (path === '/locations/not-json') return { status: 200, body: echo };
      const location = {
        id: 1,
        slug: 'x',
        name: `branch ${KEY}`,
        active: true,
        address: {},
        profile_url: `https://p.example/x?key=${ENCODED}`,
        default_survey_url: null,
        created_at: '2025-01-01T00:00:00Z',
      };
      if (path === '/locations/x') return { status: 200, body: location };
      // PHP's json_encode writes every "/" as "\/": the key's slash, escaped, until parsed.
      if (path === '/locations/php')
        return { status: 200, body: JSON.stringify(location).replaceAll('/', '\\/') };
      if (path === '/webhook')
        return { status: 200, body: [{ id: 7, url: 'https://m.example/hook', last_error: `401: ${echo}` }] };
      return { status: 404, body: { error: 'not found' } };
    });
    // The log's own scrubber knows nothing: what reaches it must already be clean.
    const destination = { write: (line: string) => logged.push(line) } as unknown as NodeJS.WritableStream;
    const log = makeLogger({ level: 'trace', scrubber: new SecretScrubber(), destination });
    api = testApi(
      { url: platform.url, apiKey: KEY },
      { log, retry: { maxRetries: 1, budgetMs: 5_000, baseDelayMs: 1, maxDelayMs: 5 } },
    );
    db = await freshDb();
  });
  afterAll(async () => {
    await api?.close();
    await platform?.close();
    await db?.close();
  });

  const expectNoKey = (value: unknown) => {
    const text = everything(value);
    expect(text).not.toContain(KEY);
    expect(text).not.toContain(ENCODED);
  };

  it('keeps the key out of a 4xx error, whose platform text is otherwise kept', async () => {
    const error = await api.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiRequestError);
    expect((error as Error).message).toBe(
      'GET /reviews answered 400: unknown parameter for api key [REDACTED] (sent as [REDACTED])',
    );
    expectNoKey(error);
  });

  it('keeps the key out of a 5xx error and out of a body that is not JSON', async () => {
    const failed = await api.professionals.get('p').catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ApiUnavailableError);
    expectNoKey(failed);
    const garbled = await api.locations.get('not-json').catch((e: unknown) => e);
    expect(garbled).toBeInstanceOf(ApiUnavailableError);
    expectNoKey(garbled);
  });

  it('keeps the key out of every parsed value: a record, a webhook last_error', async () => {
    const location = await api.locations.get('x');
    expect(location.name).toBe('branch [REDACTED]');
    expectNoKey(location);
    const [webhook] = await api.webhooks.list();
    expect(webhook!.last_error).toBe('401: unknown parameter for api key [REDACTED] (sent as [REDACTED])');
    expectNoKey(webhook);
  });

  it('keeps the key out as other JSON encoders escape it: PHP\'s "\\/", Go\'s "\\u0026"', async () => {
    const location = await api.locations.get('php');
    expect(location.name).toBe('branch [REDACTED]');
    expectNoKey(location);
    const htmlKey = 'rm_live_a&b<c>d';
    const goEncoded = JSON.stringify({ error: `bad key ${htmlKey}` }).replace(
      /[<>&]/g,
      (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
    );
    expect(goEncoded).not.toContain(htmlKey);
    expect(JSON.parse(keyScrubber(htmlKey).scrub(goEncoded))).toEqual({ error: 'bad key [REDACTED]' });
  });

  it('keeps the key out of sync_runs.error and the log', async () => {
    const ctx = pullContext(db, api);
    await expect(
      runJob(
        { db: db, log: ctx.log },
        { name: JOB.reviews, run: (c, s) => syncReviews(ctx, c, s) },
        { wait: true },
      ),
    ).rejects.toThrow(ApiRequestError);
    const run = await db.knex(db.table('sync_runs')).where({ job: JOB.reviews }).first();
    expect(run.error).toBe(
      'GET /reviews answered 400: unknown parameter for api key [REDACTED] (sent as [REDACTED])',
    );
    expect(logged.length).toBeGreaterThan(0); // the retries above were logged
    expectNoKey(logged.join(''));
  });
});

/** `value` as PHP's json_encode with JSON_HEX_TAG | JSON_HEX_AMP writes it: `\/`, `\u003C`, `\u00e9`. */
const phpHexJson = (value: unknown) =>
  JSON.stringify(value)
    .replaceAll('/', '\\/')
    .replace(/[<>&]/g, (c) => `\\u${hex(c).toUpperCase()}`)
    .replace(/[\u0080-\uffff]/g, (c) => `\\u${hex(c)}`);

/** `text` with every character written as `\uXXXX`, the hex digits in either case, as JSON allows. */
const everyCharEscaped = (text: string) =>
  [...text].map((c, i) => `\\u${i % 2 === 0 ? hex(c) : hex(c).toUpperCase()}`).join('');

const hex = (c: string) => c.charCodeAt(0).toString(16).padStart(4, '0');

/** Any valid JSON escaping of the key, not only the forms of the common encoders, is caught. */
describe('a platform that echoes the API key in any JSON escaping', () => {
  // A slash, HTML characters and a non-ASCII letter (Latin-1, which a header can carry).
  const MIXED_KEY = 'rm_live_é<a&b>/k3y';
  let platform: FakePlatform;
  let api: PartnerApi;
  beforeAll(async () => {
    const location = (name: string) => ({
      id: 1,
      slug: 'x',
      name,
      active: true,
      address: {},
      profile_url: 'https://p.example/x',
      default_survey_url: null,
      created_at: '2025-01-01T00:00:00Z',
    });
    platform = await startFakePlatform(({ path }) => {
      if (path === '/locations/php')
        return { status: 200, body: phpHexJson(location(`branch ${MIXED_KEY}`)) };
      if (path === '/locations/escaped')
        return {
          status: 200,
          body: JSON.stringify(location('branch KEY')).replace('KEY', everyCharEscaped(MIXED_KEY)),
        };
      if (path === '/reviews')
        return { status: 400, body: phpHexJson({ error: `bad key ${MIXED_KEY}, "quoted"` }) };
      return { status: 404, body: { error: 'not found' } };
    });
    api = testApi({ url: platform.url, apiKey: MIXED_KEY });
  });
  afterAll(async () => {
    await api?.close();
    await platform?.close();
  });

  it("keeps the key out as PHP's JSON_HEX_* flags escape it, slash, HTML and non-ASCII together", async () => {
    const location = await api.locations.get('php');
    expect(location.name).toBe('branch [REDACTED]');
    expect(everything(location)).not.toContain(MIXED_KEY);
  });

  it('keeps the key out when every character of it is written as \\uXXXX', async () => {
    const location = await api.locations.get('escaped');
    expect(location.name).toBe('branch [REDACTED]');
    expect(everything(location)).not.toContain(MIXED_KEY);
  });

  it("keeps the key out of an error, and the rest of the platform's text intact", async () => {
    const error = await api.reviews.page({ since: null, cursor: null }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ApiRequestError);
    expect((error as Error).message).toBe('GET /reviews answered 400: bad key [REDACTED], "quoted"');
    expect(everything(error)).not.toContain(MIXED_KEY);
  });
});
