import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * The webhook benchmark's baseline: a bare node:http server in a process of its own that reads
 * each request's body and answers 200, as the receiver does, without verifying or storing anything.
 */
const server = createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"status":"accepted"}');
  });
});
server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
