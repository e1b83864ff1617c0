import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll } from 'vitest';
import type { Db } from '../../src/db/connect.js';
import type { PartnerApi } from '../../src/partner-api/client.js';
import type { OutboxSender } from '../../src/push/events/outboxSender.js';
import type { SandboxOptions } from '../../src/sandbox/server.js';
import { freshDb } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { quickOutboxSender } from './helpers.js';

/** What the gateway does to the next POSTs of events; every other request is forwarded as it is. */
export interface GatewayFaults {
  /** Answered 503 without being forwarded: the platform is down and never sees them. */
  unavailable: number;
  /**
   * Forwarded, then answered with an HTML 502 once the platform has answered (a proxy whose
   * upstream connection broke while the answer came back): the platform has acted on them.
   */
  badGateways: number;
  /**
   * A POST whose body this returns a text for is answered 403 with it as the platform's `error`,
   * without being forwarded (the platform refusing that one event while the key is good: the
   * key's check, a GET, still reaches the sandbox).
   */
  refuse: (body: string) => string | undefined;
  /**
   * While true, POSTs of events are answered 405 with no body, not forwarded: a gateway that does
   * not route the method there.
   */
  notRouted: boolean;
  /** Requests forwarded to the platform. */
  forwarded: number;
  /**
   * Awaited before a POST of an event is answered (refused or forwarded), with its body: lets a
   * test order the answers, or hold them until it is ready.
   */
  beforeAnswer: (body: string) => Promise<void>;
}

/** A gateway in front of the sandbox, over real HTTP, for the answers the sandbox does not give. */
export async function startOutboxGateway(upstream: string) {
  const gateway: GatewayFaults = {
    unavailable: 0,
    badGateways: 0,
    refuse: () => undefined,
    notRouted: false,
    forwarded: 0,
    beforeAnswer: async () => {},
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      const eventPost = req.method === 'POST' && req.url?.endsWith('/events') === true;
      if (eventPost) await gateway.beforeAnswer(body.toString('utf8'));
      if (eventPost && gateway.notRouted) {
        res.writeHead(405, { allow: 'GET' });
        res.end();
        return;
      }
      const refusal = eventPost ? gateway.refuse(body.toString('utf8')) : undefined;
      if (refusal !== undefined || (eventPost && gateway.unavailable > 0)) {
        if (refusal === undefined) gateway.unavailable--;
        res.writeHead(refusal === undefined ? 503 : 403, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: refusal ?? 'down for maintenance' }));
        return;
      }
      const headers: Record<string, string> = {};
      for (const name of ['x-api-key', 'content-type', 'accept']) {
        const value = req.headers[name];
        if (typeof value === 'string') headers[name] = value;
      }
      const answer = await fetch(upstream + req.url, {
        method: req.method,
        headers,
        body: req.method === 'GET' ? undefined : body,
      });
      const answered = Buffer.from(await answer.arrayBuffer());
      gateway.forwarded++;
      if (eventPost && gateway.badGateways > 0) {
        gateway.badGateways--;
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end(
          '<html><head><title>502 Bad Gateway</title></head><body><h1>502 Bad Gateway</h1></body></html>',
        );
        return;
      }
      res.writeHead(answer.status, {
        'content-type': answer.headers.get('content-type') ?? 'application/json',
      });
      res.end(answered);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    gateway,
    url,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type QuickSender = Parameters<typeof quickOutboxSender>;

const outboxRow = (db: Db, key: string, columns: readonly string[]) =>
  db
    .knex(db.table('events_outbox'))
    .where({ idempotency_key: key })
    .first(...columns);

export interface OutboxGatewayFixture {
  readonly sandbox: TestSandbox;
  /** What the gateway does to the next events: a test sets it. */
  readonly gateway: GatewayFaults;
  /** The gateway's own address; the sandbox's, `sandbox.url`, goes around it. */
  readonly gatewayUrl: string;
  readonly db: Db;
  /** quickOutboxSender on this database with the sandbox's key; its client is closed after the block. */
  sender(
    deps: Omit<QuickSender[0], 'db'>,
    platform: Omit<QuickSender[1], 'apiKey'>,
    options: QuickSender[2],
  ): OutboxSender;
  /** The events_outbox row of `key`: `columns` of it, by default those most tests look at. */
  row(key: string, columns?: readonly string[]): ReturnType<typeof outboxRow>;
  /** How many events carrying `key` in their metadata the platform holds. */
  received(key: string): Promise<number>;
}

/**
 * For the describe block it is called in: a sandbox started with `options`, the outbox gateway in
 * front of it, a fresh database, and the clients of the senders the tests make; all closed after
 * the block, in the reverse order, whichever of them were started.
 */
export function outboxGatewayFixture(options: SandboxOptions): OutboxGatewayFixture {
  const apis: PartnerApi[] = [];
  const started = {} as {
    sandbox: TestSandbox;
    gateway: Awaited<ReturnType<typeof startOutboxGateway>>;
    db: Db;
  };
  beforeAll(async () => {
    started.sandbox = await testSandbox(options);
    started.gateway = await startOutboxGateway(started.sandbox.url);
    started.db = await freshDb();
  });
  afterAll(async () => {
    for (const api of apis) await api.close();
    await started.db?.close();
    await started.gateway?.close();
    await started.sandbox?.close();
  });
  return {
    get sandbox() {
      return started.sandbox;
    },
    get gateway() {
      return started.gateway.gateway;
    },
    get gatewayUrl() {
      return started.gateway.url;
    },
    get db() {
      return started.db;
    },
    sender(deps, platform, senderOptions) {
      const { sender, api } = quickOutboxSender(
        { db: started.db, ...deps },
        { ...platform, apiKey: started.sandbox.apiKey },
        senderOptions,
      );
      apis.push(api);
      return sender;
    },
    row: (key, columns = ['state', 'possible_duplicate', 'attempts', 'last_error']) =>
      outboxRow(started.db, key, columns),
    async received(key) {
      const { sandbox } = started;
      return (await sandbox.control.truth(sandbox.companyId)).events.filter((e) => e.metadata?.key === key)
        .length;
    },
  };
}
