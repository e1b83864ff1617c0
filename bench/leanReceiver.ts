import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { openDb } from '../src/db/connect.js';
import { makeLogger, SecretScrubber } from '../src/log.js';
import { parseEvent } from '../src/webhooks/event.js';
import { Inbox } from '../src/webhooks/inbox.js';
import { verifyDelivery } from '../src/webhooks/signature.js';

/**
 * The webhook benchmark's second yardstick: the least a correct receiver does, in a process of its
 * own. A bare node:http server that verifies each delivery's signature, parses and validates it,
 * and answers 200 only after the daemon's own group commit stored it (the same inbox and review
 * upsert), with none of the daemon's framework, refusal handling, metrics or logs. Where it is no
 * faster than `run`, the receiver's cost is the work itself, not what surrounds it.
 * DATABASE_URL and DB_SCHEMA name a migrated schema; WEBHOOK_SECRETS the one secret.
 */
const log = makeLogger({ level: 'error', scrubber: new SecretScrubber() });
const db = await openDb({
  url: process.env.DATABASE_URL,
  schema: process.env.DB_SCHEMA ?? 'review_mirror',
  poolMax: 10,
  dataDir: undefined,
  log,
});
const inbox = new Inbox({ db, log });
const secrets = [process.env.WEBHOOK_SECRETS ?? ''];

const header = (value: string | string[] | undefined) => (Array.isArray(value) ? value[0] : value);

const server = createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const answer = (status: number, outcome: string) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(`{"status":"${outcome}"}`);
    };
    const body = Buffer.concat(chunks);
    const verified = verifyDelivery(
      {
        timestamp: header(request.headers['x-ee-timestamp']),
        signature: header(request.headers['x-ee-signature']),
        body,
      },
      secrets,
      { nowSeconds: Date.now() / 1000, toleranceSeconds: 300 },
    );
    if (!verified.ok) return answer(401, verified.reason);
    const parsed = parseEvent(body);
    if (!parsed.ok) return answer(400, parsed.reason);
    inbox
      .submit({
        event: parsed.event,
        body: body.toString('utf8'),
        observedAt: new Date(Math.min(verified.timestamp * 1000, Date.now())),
      })
      .then(
        (outcome) => answer(200, outcome),
        () => answer(503, 'commit_failed'),
      );
  });
});
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => {
  server.close(() => {
    void db.close().then(() => process.exit(0));
  });
  server.closeAllConnections();
});
