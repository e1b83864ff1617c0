import { readFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import { SecretScrubber } from '../../src/log.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import { OutboxSender } from '../../src/push/events/outboxSender.js';
import { enqueueEvents } from '../../src/push/events/outboxSql.js';
import { freshDb } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { testApi } from '../pull/helpers.js';
import { newEvent } from './helpers.js';

/**
 * Sends that fail before any byte of the request left this process, over the real client and the
 * real database: the platform cannot have the event, so it is sent again later, neither parked
 * (even under the `park` policy) nor counted as a possible duplicate; once the fault is gone it
 * reaches the platform once.
 */
describe('outbox sends that never left the process', () => {
  let sandbox: TestSandbox;
  let db: Db;
  const apis: PartnerApi[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ seed: 43 });
    db = await freshDb();
  });
  afterAll(async () => {
    for (const api of apis) await api.close();
    await db?.close();
    await sandbox?.close();
  });

  const sender = (over: { key?: string; url?: string }) => {
    const api = testApi(
      { url: over.url ?? sandbox.url, apiKey: over.key ?? sandbox.apiKey },
      { retry: { maxRetries: 0, budgetMs: 0, baseDelayMs: 5, maxDelayMs: 50 } },
    );
    apis.push(api);
    return new OutboxSender(
      // The jitter fixed at its top: a row sent back to pending is due NOT_SENT_DUE_MS later, so
      // the drain that failed it ends without claiming it again (with a backoff near 0 it could,
      // when its outcome was written before the drain's next claim).
      { db, api, log: quietLog, scrubber: new SecretScrubber(), random: () => 0.999_999 },
      {
        worker: 'not-sent',
        concurrency: 1,
        ratePerSecond: 100,
        leaseMs: 30_000,
        policy: {
          unknownOutcome: 'park',
          maxAttempts: 5,
          baseDelayMs: NOT_SENT_DUE_MS + 1,
          maxDelayMs: NOT_SENT_DUE_MS + 1,
        },
      },
    );
  };
  const row = (key: string) =>
    db
      .knex(db.table('events_outbox'))
      .where({ idempotency_key: key })
      .first('state', 'possible_duplicate', 'attempts', 'last_error');
  const received = async (key: string) =>
    (await sandbox.control.truth(sandbox.companyId)).events.filter((e) => e.metadata?.key === key).length;

  /** One send under `fault`, then one to the sandbox; returns the first send's stored error. */
  const pendingThenSentOnce = async (key: string, fault: { key?: string; url?: string }) => {
    await enqueueEvents(db.knex, db, [newEvent(key)]);
    const failed = await sender(fault).drain();
    expect(failed).toMatchObject({ retried: 1, parked: 0, possibleDuplicates: 0 });
    const afterFault = await row(key);
    expect(afterFault).toMatchObject({ state: 'pending', possible_duplicate: false, attempts: 1 });
    expect(afterFault?.last_error).toContain('not sent');
    expect(await received(key)).toBe(0);

    await new Promise((resolve) => setTimeout(resolve, NOT_SENT_DUE_MS + 50));
    expect(await sender({}).drain()).toMatchObject({ sent: 1, parked: 0, possibleDuplicates: 0 });
    expect(await row(key)).toMatchObject({ state: 'sent', possible_duplicate: false });
    expect(await received(key)).toBe(1);
    return afterFault?.last_error as string;
  };

  it.each([
    // undici refuses the header value while it builds the request: nothing is dispatched.
    ['a header value the client refuses', 'invalid-header', { key: `${'k'.repeat(8)}\nx` }],
    // connect() itself fails (ENETUNREACH, or EACCES, by the host's routing): no connection, no byte.
    ['a connection that could not be made', 'no-route', { url: 'http://255.255.255.255:80' }],
  ] as const)(
    '%s: pending again, not parked nor a possible duplicate, then sent once',
    async (_, key, fault) => {
      await pendingThenSentOnce(key, fault);
    },
  );

  it('a certificate the client refuses: pending again, not parked nor a possible duplicate, then sent once', async () => {
    // The handshake is where the certificate is refused: it reached the server, no request did.
    const platform = await selfSignedServer();
    try {
      const error = await pendingThenSentOnce('self-signed', { url: platform.url });
      expect(error).toContain('DEPTH_ZERO_SELF_SIGNED_CERT');
      expect(platform.handshakesRefused()).toBeGreaterThan(0);
      expect(platform.requests()).toBe(0);
    } finally {
      await platform.close();
    }
  });
});

/** When a send that never left is due again: longer than a drain's claim, write and claim again. */
const NOT_SENT_DUE_MS = 300;

const fixture = (name: string) => fileURLToPath(new URL(`../webhooks/fixtures/${name}`, import.meta.url));

/**
 * An HTTPS server on loopback with the tests' self-signed certificate, which no client trusts: every
 * connection to it fails its verification. It answers any request it gets as the platform would
 * accept an event, so a request that did get through would count as sent.
 */
async function selfSignedServer(): Promise<{
  url: string;
  requests: () => number;
  handshakesRefused: () => number;
  close: () => Promise<void>;
}> {
  let requests = 0;
  let handshakesRefused = 0;
  const server: Server = createServer(
    { key: await readFile(fixture('key.pem')), cert: await readFile(fixture('cert.pem')) },
    (_req, res) => {
      requests++;
      res.writeHead(201, { 'content-type': 'application/json' }).end('{"id":"evt_1","status":"queued"}');
    },
  );
  server.on('tlsClientError', () => handshakesRefused++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${port}`,
    requests: () => requests,
    handshakesRefused: () => handshakesRefused,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
