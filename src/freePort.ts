import { once } from 'node:events';
import { createServer } from 'node:net';

/**
 * A loopback TCP port free right now, for a server whose address must be known before it starts
 * (a webhook URL registered ahead of the receiver, a child process told its port).
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}
