import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeLogger, SecretScrubber } from '../../src/log.js';
import { makeMetrics } from '../../src/metrics.js';
import { OutboxListener } from '../../src/push/events/outboxListener.js';
import { freePort } from '../helpers/cli.js';
import { POSTGRES_URL } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
import { type RunningPgBouncer, startPgBouncer } from '../helpers/pgbouncer.js';
import { waitFor } from '../helpers/wait.js';

const timed = async (work: Promise<void>): Promise<number> => {
  const started = performance.now();
  await work;
  return performance.now() - started;
};

/**
 * Closing the LISTEN session at shutdown, which has a deadline: whether the session is connecting,
 * connected, or waiting to reconnect, `close` returns at once.
 */
describe('the outbox LISTEN session at shutdown', () => {
  let blackHole: Server;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    // Accepts connections and never answers: a connect that hangs until its own timeout (10 s).
    blackHole = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => blackHole?.close(resolve));
  });
  const listener = (url: string, wake = () => {}) =>
    new OutboxListener(url, 'listen_test', wake, quietLog, new SecretScrubber());

  it('closes at once while connecting', async () => {
    const { port } = blackHole.address() as { port: number };
    const connecting = listener(`postgres://postgres@127.0.0.1:${port}/test`);
    await waitFor(() => sockets.length > 0, 5_000, 5);
    expect(await timed(connecting.close())).toBeLessThan(1_000);
  });

  it('closes at once while connecting to a live server, which then answers', async () => {
    const connecting = listener(POSTGRES_URL);
    expect(await timed(connecting.close())).toBeLessThan(1_000);
  });

  it('closes at once while waiting to reconnect', { timeout: 15_000 }, async () => {
    // Nothing listens there: each connect fails at once, and the waits between them double.
    const down = listener(`postgres://postgres@127.0.0.1:${await freePort()}/test`);
    await sleep(3_500); // in the third wait (4 s), which ends 7 s after the start
    expect(await timed(down.close())).toBeLessThan(1_000);
  });

  it('closes at once while listening, having woken the outbox once connected', async () => {
    let wakes = 0;
    const listening = listener(POSTGRES_URL, () => wakes++);
    await waitFor(() => wakes > 0, 10_000, 5);
    expect(await timed(listening.close())).toBeLessThan(1_000);
  });
});

/** A logger whose every line (info and above) the test reads back. */
function logLines() {
  const lines: Array<{ level: string; msg: string } & Record<string, unknown>> = [];
  const log = makeLogger({
    level: 'info',
    scrubber: new SecretScrubber(),
    destination: {
      write: (line: string) => lines.push(JSON.parse(line)),
    } as unknown as NodeJS.WritableStream,
  });
  return { log, lines };
}

/** NOTIFYs the outbox's channel of `schema` from a session of its own, straight to PostgreSQL. */
async function notifyDirectly(schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: POSTGRES_URL });
  await client.connect();
  try {
    await client.query('select pg_notify($1, $2)', [`${schema}_events_outbox`, 'enqueued']);
  } finally {
    await client.end();
  }
}

/**
 * Whether the session hears what other sessions NOTIFY. A transaction pooler takes the LISTEN
 * without an error and then delivers nothing: events wait for the poll, and that must be said.
 */
describe('the outbox LISTEN session, checked', () => {
  let bouncer: RunningPgBouncer;
  beforeAll(async () => {
    bouncer = await startPgBouncer(POSTGRES_URL);
  });
  afterAll(async () => {
    await bouncer?.close();
  });

  const listening = (url: string, schema: string) => {
    const { log, lines } = logLines();
    const metrics = makeMetrics();
    let wakes = 0;
    const listener = new OutboxListener(url, schema, () => wakes++, log, new SecretScrubber(), metrics);
    const gauge = async () => (await metrics.outboxListening.get()).values[0]?.value;
    return { listener, lines, gauge, wakes: () => wakes };
  };
  const warnings = (lines: ReadonlyArray<{ level: string; msg: string }>) =>
    lines.filter((l) => l.level === 'warn' && /outbox LISTEN/.test(l.msg));

  it('through a transaction-pooling PgBouncer: says once that nothing arrives, naming DATABASE_LISTEN_URL and the poll', {
    timeout: 30_000,
  }, async () => {
    const schema = 'listen_pooled';
    const { listener, lines, gauge, wakes } = listening(bouncer.url, schema);
    try {
      await waitFor(() => warnings(lines).length > 0, 20_000, 20);
      const [warning] = warnings(lines);
      expect(warning!.msg).toContain('DATABASE_LISTEN_URL');
      expect(warning!.msg).toMatch(/poll \(EVENTS_POLL_SECONDS\)/);
      expect(warning!.msg).toContain('transaction pooler');
      expect(JSON.stringify(lines)).not.toContain(bouncer.url);
      expect(await gauge()).toBe(0);
      // What it says is so: an enqueue's NOTIFY never wakes the outbox through the pooler.
      const before = wakes();
      await notifyDirectly(schema);
      await sleep(1_000);
      expect(wakes()).toBe(before);
      expect(warnings(lines)).toHaveLength(1);
    } finally {
      await listener.close();
    }
  });

  it('straight to PostgreSQL: hears other sessions, says nothing, and exports 1', {
    timeout: 30_000,
  }, async () => {
    const schema = 'listen_direct';
    const { listener, lines, gauge, wakes } = listening(POSTGRES_URL, schema);
    try {
      await waitFor(async () => (await gauge()) === 1, 10_000, 20);
      // Its one wake at LISTEN (rows committed before it); its own check wakes nothing.
      expect(wakes()).toBe(1);
      await notifyDirectly(schema);
      await waitFor(() => wakes() === 2, 5_000, 10);
      expect(lines.filter((l) => l.level !== 'info')).toEqual([]);
    } finally {
      await listener.close();
    }
    expect(await gauge()).toBe(0);
  });
});

/**
 * A server that completes the startup handshake (trust) and then answers no query, and ignores the
 * client's goodbye: a pooler or proxy stalled for good after accepting the session.
 */
async function stalledAfterStartup(): Promise<{
  url: string;
  sessions: () => number;
  close: () => Promise<void>;
}> {
  const sockets: Socket[] = [];
  const server = createServer({ allowHalfOpen: true }, (socket) => {
    sockets.push(socket);
    let started = false;
    socket.on('data', () => {
      if (started) return;
      started = true;
      // AuthenticationOk, then ReadyForQuery (idle).
      socket.write(Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49]));
    });
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/test`,
    sessions: () => sockets.length,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('the outbox LISTEN session, stalled', () => {
  it('gives up a LISTEN that is never answered, says so, and connects again', {
    timeout: 40_000,
  }, async () => {
    const stalled = await stalledAfterStartup();
    const { log, lines } = logLines();
    const listener = new OutboxListener(stalled.url, 'listen_stalled', () => {}, log, new SecretScrubber());
    try {
      await waitFor(() => stalled.sessions() >= 2, 30_000, 50);
      const failed = lines.find((l) => l.msg === 'outbox LISTEN session failed');
      expect(JSON.stringify(failed?.err)).toMatch(/timeout/i);
    } finally {
      expect(await timed(listener.close())).toBeLessThan(2_500);
      await stalled.close();
    }
  });
});
