import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** What the gateway does to the next POSTs of events; every other request is forwarded as it is. */
interface GatewayFaults {
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
