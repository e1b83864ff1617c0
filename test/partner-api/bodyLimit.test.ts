import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { ApiRequestError, ApiSchemaError, ApiUnavailableError } from '../../src/partner-api/errors.js';
import { MAX_BODY_BYTES } from '../../src/partner-api/http.js';
import { fakePlatformFixture, testApi } from '../pull/helpers.js';

const EMPTY_PAGE = JSON.stringify({
  reviews: [],
  pagination: { count: 0, has_more: false, next_cursor: null },
});
// Valid JSON all the same: whitespace may follow a value.
const padded = (json: string) => json + ' '.repeat(MAX_BODY_BYTES);

const failure = (run: Promise<unknown>) =>
  run.then(
    () => undefined,
    (e: unknown) => e,
  );

/** Answers past MAX_BODY_BYTES, over real HTTP: never read, parsed and validated whole. */
describe('an answer larger than the client reads', () => {
  const fx = fakePlatformFixture(({ path }) => {
    if (path === '/reviews') return { status: 200, body: padded(EMPTY_PAGE) };
    if (path === '/locations/big') return { status: 422, body: `{"error":"${'x'.repeat(MAX_BODY_BYTES)}"}` };
    if (path === '/events') return { status: 202, body: padded('{"id":"ev_1","status":"queued"}') };
    return { status: 404, body: { error: 'not found' } };
  });

  it('fails a 2xx page as an invalid body, saying it is too large', async () => {
    const error = await failure(fx.api.reviews.page({ since: null, cursor: null }));
    expect(error).toBeInstanceOf(ApiSchemaError);
    expect((error as ApiSchemaError).field).toBe('(body)');
    expect((error as Error).message).toBe(
      `GET /reviews returned an invalid body: (body): is larger than ${MAX_BODY_BYTES} bytes`,
    );
  });

  it("keeps the first bytes of an error status's body for its excerpt", async () => {
    const error = await failure(fx.api.locations.get('big'));
    expect(error).toBeInstanceOf(ApiRequestError);
    expect((error as ApiRequestError).status).toBe(422);
    // Cut, the body is no JSON: its first 200 characters are the excerpt.
    expect((error as ApiRequestError).platformError).toBe(`{"error":"${'x'.repeat(190)}`);
  });

  it('takes it as accepted, once, where the caller needs no answer (an event sent)', async () => {
    const before = fx.platform.requests();
    expect(await fx.api.events.send({ email: 'a@example.test', event_type: 'matter.closed' })).toEqual({
      id: null,
      status: null,
    });
    expect(fx.platform.requests() - before).toBe(1);
  });
});

/**
 * A read's answer is what it is for. The webhook list's schema takes an empty body for "none": an
 * HTML page or a body past the bound in its place must fail the read, not read as no webhooks
 * (the start-up would then register the URL again, and every review be delivered twice).
 */
describe('a read answered 2xx with no answer it can use', () => {
  let listed = 0;
  const fx = fakePlatformFixture(
    ({ method, path }) => {
      if (method !== 'GET' || path !== '/webhook') return { status: 404, body: { error: 'not found' } };
      listed++;
      if (listed <= 3)
        return { status: 200, body: '<html><body>Service temporarily unavailable</body></html>' };
      if (listed === 4) return { status: 200, body: padded('[]') };
      return { status: 200, body: '' };
    },
    { retry: { maxRetries: 2, budgetMs: 5_000, baseDelayMs: 1, maxDelayMs: 5 } },
  );

  it('fails a page that is not JSON, and one past the bound, after retrying them', async () => {
    const html = await failure(fx.api.webhooks.list());
    expect(html).toBeInstanceOf(ApiUnavailableError);
    expect((html as Error).message).toBe(
      'GET /webhook returned a body that is not JSON (an HTML page, perhaps not the platform) (gave up after 2 retries)',
    );
    const big = await failure(fx.api.webhooks.list());
    expect(big).toBeInstanceOf(ApiSchemaError);
    expect(listed).toBe(4);
    // An empty body still means none.
    expect(await fx.api.webhooks.list()).toEqual([]);
  });
});

/**
 * The read stops at the bound and drops the connection. The fake platform sends whole bodies
 * only, so a bare server streams this one and says whether it could write it to the end.
 */
describe('an answer streamed past the bound', () => {
  const TOTAL_BYTES = 4 * MAX_BODY_BYTES;
  const CHUNK = Buffer.from(' '.repeat(1024 * 1024));
  let api: PartnerApi;
  let written = 0;
  let outcome: Promise<'finished' | 'dropped'>;
  const server = createServer((_req, res) => {
    outcome = new Promise((resolve) => {
      res.on('finish', () => resolve('finished'));
      res.on('close', () => resolve(res.writableFinished ? 'finished' : 'dropped'));
    });
    res.writeHead(200, { 'content-type': 'application/json' });
    res.write(EMPTY_PAGE);
    pump(res);
  });
  const pump = (res: ServerResponse) => {
    while (written < TOTAL_BYTES && !res.destroyed) {
      written += CHUNK.length;
      if (!res.write(CHUNK)) return void res.once('drain', () => pump(res));
    }
    if (!res.destroyed) res.end();
  };

  beforeAll(async () => {
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    api = testApi(
      { url: `http://127.0.0.1:${port}`, apiKey: 'rm_test_key_123456' },
      { requestTimeoutMs: 20_000 },
    );
  });
  afterAll(async () => {
    await api?.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('stops reading past MAX_BODY_BYTES and hangs up, instead of reading the rest', async () => {
    const error = await failure(api.reviews.page({ since: null, cursor: null }));
    expect(error).toBeInstanceOf(ApiSchemaError);
    expect(await outcome).toBe('dropped');
    expect(written).toBeLessThan(TOTAL_BYTES);
  });
});
