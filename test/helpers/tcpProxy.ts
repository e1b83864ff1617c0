import { once } from 'node:events';
import { createConnection, createServer, type Socket } from 'node:net';

export interface TcpProxy {
  /** `postgres://…` through the proxy, for the database `database`. */
  url(database: string): string;
  /** Stops forwarding bytes both ways without closing anything: every connection hangs. */
  freeze(): void;
  /** Forwards again, bytes held back included. */
  heal(): void;
  /** Destroys every connection, as a server restart, a failover or pg_terminate_backend would. */
  dropAll(): void;
  /** Drops every connection and refuses new ones until `up()`: a server restarting. */
  down(): void;
  up(): void;
  close(): Promise<void>;
}

/** A loopback TCP proxy in front of `upstream` (the local PostgreSQL), for stalls and drops. */
export async function startTcpProxy(upstream = { host: '127.0.0.1', port: 5432 }): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let frozen = false;
  let refusing = false;
  const server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const target = createConnection(upstream);
    const pair: [Socket, Socket] = [client, target];
    pairs.add(pair);
    const forget = () => {
      pairs.delete(pair);
      client.destroy();
      target.destroy();
    };
    for (const [from, to] of [
      [client, target],
      [target, client],
    ] as const) {
      // Read only while not frozen: held bytes stay in the socket buffers, as on a frozen network.
      from.on('data', (chunk) => to.write(chunk));
      from.on('error', forget);
      from.on('close', forget);
      if (frozen) from.pause();
    }
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  const each = (fn: (socket: Socket) => void) => {
    for (const pair of pairs) pair.forEach(fn);
  };
  return {
    url: (database) => `postgres://postgres@127.0.0.1:${port}/${database}`,
    freeze: () => {
      frozen = true;
      each((s) => s.pause());
    },
    heal: () => {
      frozen = false;
      each((s) => s.resume());
    },
    dropAll: () => each((s) => s.destroy()),
    down: () => {
      refusing = true;
      each((s) => s.destroy());
    },
    up: () => {
      refusing = false;
    },
    close: async () => {
      each((s) => s.destroy());
      server.close();
      await once(server, 'close');
    },
  };
}
