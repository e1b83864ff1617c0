import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretScrubber } from '../../src/log.js';
import { OutboxListener } from '../../src/push/events/outboxListener.js';
import { freePort } from '../helpers/cli.js';
import { POSTGRES_URL } from '../helpers/db.js';
import { quietLog } from '../helpers/log.js';
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
