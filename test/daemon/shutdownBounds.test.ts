import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliProcess, type CliResult, freePort, runCli } from '../helpers/cli.js';
import { type DaemonSetup, daemonSetup } from '../helpers/daemon.js';
import { dropSchema, POSTGRES_URL } from '../helpers/db.js';
import { type TestSandbox, testSandbox } from '../helpers/sandbox.js';
import { waitFor } from '../helpers/wait.js';
import { makeReview, signedDelivery } from '../webhooks/helpers.js';

const SECRET = 'whsec_shutdown_bounds';
const fixture = (name: string) => fileURLToPath(new URL(`../webhooks/fixtures/${name}`, import.meta.url));

/** The messages of a daemon's JSON log lines, in order. */
function messages(stdout: string): string[] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => (JSON.parse(line) as { msg: string }).msg);
}

/** A TCP connection to `port` that sends `text` (nothing when empty) and then says nothing more. */
async function openIdle(port: number, text = ''): Promise<Socket> {
  const socket = connect(port, '127.0.0.1');
  socket.on('error', () => {});
  // Reading, so that the daemon's end of it is seen.
  socket.resume();
  await once(socket, 'connect');
  if (text !== '') socket.write(text);
  return socket;
}

/** Whether the daemon closed `socket` (not the test). */
const closedByPeer = (socket: Socket) => socket.readableEnded || socket.destroyed;

/** A `run` daemon on the local server, against a platform that is not there (no job gets far). */
async function startRun(
  vars: Record<string, string> = {},
): Promise<{ setup: DaemonSetup; daemon: CliProcess }> {
  const setup = await daemonSetup(
    { url: `http://127.0.0.1:${await freePort()}`, apiKey: 'sk_test_bounds' },
    {
      DATABASE_URL: POSTGRES_URL,
      LOG_LEVEL: 'info',
      SHUTDOWN_GRACE_SECONDS: '2',
      WEBHOOK_SECRETS: SECRET,
      ...vars,
    },
  );
  const daemon = new CliProcess(['run'], setup.env);
  await waitFor(() => daemon.stdout.includes('"msg":"started"') || daemon.child.exitCode !== null, 45_000);
  expect(daemon.stdout, daemon.stderr).toContain('"msg":"started"');
  return { setup, daemon };
}

/** SIGTERM, then the exit; a daemon past every bound is killed so that the test ends. */
async function terminate(daemon: CliProcess): Promise<CliResult> {
  daemon.kill('SIGTERM');
  const killer = setTimeout(() => daemon.kill('SIGKILL'), 30_000);
  try {
    return await daemon.exited;
  } finally {
    clearTimeout(killer);
  }
}

/** A session of the test's own holding `lock table … in access exclusive mode` until `release`. */
async function lockTable(schema: string, table: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  await client.query('begin');
  await client.query(`lock table "${schema}"."${table}" in access exclusive mode`);
  return {
    release: async () => {
      await client.query('rollback').catch(() => {});
      await client.end().catch(() => {});
    },
  };
}

describe('`run` shutdown: clients that never finish do not hold it', () => {
  const schemas: string[] = [];
  afterAll(async () => {
    for (const schema of schemas) await dropSchema(schema, POSTGRES_URL);
  });

  it('exits 0 with idle connections on both ports and a delivery whose body never ends', async () => {
    const { setup, daemon } = await startRun();
    schemas.push(setup.schema);
    try {
      const delivery = signedDelivery(SECRET, makeReview());
      const head = Object.entries({ ...delivery.headers, 'content-length': Buffer.byteLength(delivery.body) })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      const clients = [
        await openIdle(setup.httpPort),
        await openIdle(setup.adminPort),
        // Kept alive after one request: idle in the server's eyes.
        await openIdle(setup.adminPort, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n'),
        // Half a body, and then nothing.
        await openIdle(
          setup.httpPort,
          `POST /webhooks/review-created HTTP/1.1\r\nHost: x\r\n${head}\r\n${delivery.body.slice(0, 20)}`,
        ),
      ];
      const result = await terminate(daemon);
      // Within SHUTDOWN_GRACE_SECONDS + 5 s + 1 s; a server left waiting for its clients runs
      // into that deadline and exits 1.
      expect(result.code, result.stdout).toBe(0);
      expect(messages(result.stdout)).toContain('stopped');
      await waitFor(() => clients.every(closedByPeer), 5_000);
      for (const client of clients) client.destroy();
    } finally {
      daemon.kill('SIGKILL');
    }
  }, 90_000);

  it('exits 0 with a TLS connection that never sends its ClientHello', async () => {
    const { setup, daemon } = await startRun({
      TLS_CERT_FILE: fixture('cert.pem'),
      TLS_KEY_FILE: fixture('key.pem'),
    });
    schemas.push(setup.schema);
    try {
      const client = await openIdle(setup.httpPort);
      const result = await terminate(daemon);
      expect(result.code, result.stdout).toBe(0);
      expect(messages(result.stdout)).toContain('stopped');
      await waitFor(() => closedByPeer(client), 5_000);
      client.destroy();
    } finally {
      daemon.kill('SIGKILL');
    }
  }, 90_000);

  it('still answers a delivery whose commit is under way when shutdown begins, 200 once committed', async () => {
    const { setup, daemon } = await startRun({ WEBHOOK_COMMIT_TIMEOUT_SECONDS: '30' });
    schemas.push(setup.schema);
    const lock = await lockTable(setup.schema, 'webhook_inbox');
    try {
      const delivery = signedDelivery(SECRET, makeReview());
      const answer = fetch(setup.webhookUrl, {
        method: 'POST',
        headers: delivery.headers,
        body: delivery.body,
        signal: AbortSignal.timeout(30_000),
      });
      // The commit waits on the lock: past the reading of its body, not yet answered.
      await sleep(1_000);
      daemon.kill('SIGTERM');
      // Past the bound after which connections without a request being answered are cut.
      await sleep(3_000);
      await lock.release();
      const res = await answer;
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ status: 'accepted' });
      const result = await daemon.exited;
      expect(result.code, result.stdout).toBe(0);
    } finally {
      await lock.release();
      daemon.kill('SIGKILL');
    }
  }, 90_000);
});

describe('`run`: a delivery no secret matches while the database hangs', () => {
  let setup: DaemonSetup;
  let daemon: CliProcess;
  beforeAll(async () => {
    ({ setup, daemon } = await startRun({ WEBHOOK_COMMIT_TIMEOUT_SECONDS: '2' }));
  }, 60_000);
  afterAll(async () => {
    daemon?.kill('SIGKILL');
    if (setup) await dropSchema(setup.schema, POSTGRES_URL);
  });

  it('is refused (401 bad_signature) within the commit timeout, not after the database bound', async () => {
    // Re-reading the stored secrets waits on this lock, as on a frozen database.
    const lock = await lockTable(setup.schema, 'webhooks');
    try {
      // Past the minimum interval between two re-reads since start-up's.
      await sleep(1_500);
      const delivery = signedDelivery('whsec_not_ours', makeReview());
      const res = await fetch(setup.webhookUrl, {
        method: 'POST',
        headers: delivery.headers,
        body: delivery.body,
        signal: AbortSignal.timeout(20_000),
      });
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: 'bad_signature' });
    } finally {
      await lock.release();
    }
  }, 60_000);
});

describe('`run`: events outbox and scheduled jobs at shutdown', () => {
  let sandbox: TestSandbox;
  const schemas: string[] = [];
  beforeAll(async () => {
    sandbox = await testSandbox({ apiKey: 'sk_test_outbox_bounds', seedReviews: 5 });
  });
  afterAll(async () => {
    await sandbox?.close();
    for (const schema of schemas) await dropSchema(schema, POSTGRES_URL);
  });

  it('starts no job after shutdown began while an event POST hangs, and exits 0', async () => {
    await sandbox.control.setFaults({
      partner: { hang: 1, routes: ['/api/v1/partner/events'], methods: ['POST'] },
    });
    const setup = await daemonSetup(
      { url: sandbox.url, apiKey: 'sk_test_outbox_bounds' },
      {
        DATABASE_URL: POSTGRES_URL,
        LOG_LEVEL: 'info',
        SYNC_REVIEWS_CRON: '*/1 * * * * *',
        EVENTS_POLL_SECONDS: '1',
        // The hung POST ends within the grace period: it is waited for, not cut.
        API_REQUEST_TIMEOUT_SECONDS: '2',
        SHUTDOWN_GRACE_SECONDS: '5',
      },
    );
    schemas.push(setup.schema);
    const daemon = new CliProcess(['run'], setup.env);
    try {
      await waitFor(() => daemon.stdout.includes('"msg":"started"'), 45_000);
      const sent = await runCli(
        ['events', 'send', '--email', 'a@example.com', '--type', 'matter.closed'],
        setup.env,
      );
      expect(sent.code, sent.stderr).toBe(0);
      // Claimed at the next poll, its POST hanging.
      await sleep(1_500);
      const result = await terminate(daemon);
      const log = messages(result.stdout);
      const afterShutdown = log.slice(log.indexOf('shutting down'));
      expect(afterShutdown).not.toContain('sync job started');
      expect(result.code, result.stdout).toBe(0);
    } finally {
      daemon.kill('SIGKILL');
      await sandbox.control.setFaults({});
    }
  }, 90_000);
});
