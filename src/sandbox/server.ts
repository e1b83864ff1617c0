import type { Socket } from 'node:net';
import Fastify, { type FastifyError, type FastifyRequest } from 'fastify';
import type { Logger } from '../log.js';
import { controlRoutes, type RequestCounts } from './controlRoutes.js';
import { Deliverer } from './deliveries.js';
import { FaultPlan } from './faults.js';
import { partnerRoutes } from './partnerRoutes.js';
import { randomHex } from './random.js';
import { seedCompany } from './seed.js';
import { SandboxError, Store } from './store.js';

export interface SandboxOptions {
  /** Interface to listen on; 127.0.0.1 by default. */
  host?: string;
  /** TCP port; 0 picks a free one. */
  port?: number;
  /** Multiplies webhook retry waits: 1 is real time; 0.001 makes a 1-minute wait 60 ms. */
  timeScale?: number;
  /** Accept http://127.0.0.1 and http://localhost webhook URLs (the spec allows HTTPS only). */
  allowHttpWebhooks?: boolean;
  /** How long after creation a location's or professional's default survey appears (not scaled). Default 3000. */
  surveyDelayMs?: number;
  /** A webhook attempt without a complete response within this time fails as a timeout. Default 10000. */
  deliveryTimeoutMs?: number;
  /** Reviews seeded into the first company at start (and again on reset). */
  seedReviews?: number;
  /** Seeds the seeded reviews, generated defaults and fault draws. Default 1. */
  seed?: number;
  /** Key of the first company; random when omitted. */
  apiKey?: string;
  log?: Logger;
}

export interface RunningSandbox {
  /** http://HOST:PORT: the partner API's base_url is this plus /api/v1/partner, the control API /_sandbox. */
  url: string;
  /** The first company's key. */
  apiKey: string;
  companyId: string;
  close(): Promise<void>;
}

export const PARTNER_PREFIX = '/api/v1/partner';
export const CONTROL_PREFIX = '/_sandbox';

/** Counts partner requests by route pattern and status, for tests asserting how a client behaved. */
class RequestCounter {
  #total = 0;
  #byRoute: Record<string, Record<string, number>> = {};

  add(request: FastifyRequest, status: string): void {
    const route = `${request.method} ${request.routeOptions.url ?? request.url.split('?')[0]}`;
    const counts = this.#byRoute[route] ?? {};
    this.#byRoute[route] = counts;
    counts[status] = (counts[status] ?? 0) + 1;
    this.#total++;
  }

  snapshot(): RequestCounts {
    return { total: this.#total, by_route: structuredClone(this.#byRoute) };
  }

  clear(): void {
    this.#total = 0;
    this.#byRoute = {};
  }
}

/** Starts an emulation of the review platform's partner API, with the control API beside it. */
export async function startSandbox(options: SandboxOptions = {}): Promise<RunningSandbox> {
  const seed = options.seed ?? 1;
  const seedReviews = options.seedReviews ?? 0;
  const firstKey = options.apiKey ?? `rm_test_${randomHex(20)}`;
  const store = new Store({ surveyDelayMs: options.surveyDelayMs ?? 3000, seed });
  const faults = new FaultPlan(seed);
  const deliverer = new Deliverer({
    store,
    faults,
    timeScale: options.timeScale ?? 1,
    timeoutMs: options.deliveryTimeoutMs ?? 10_000,
    log: options.log,
  });
  store.onReviewsCreated = (company, reviews) => deliverer.dispatch(company, reviews);
  const requests = new RequestCounter();
  const hung = new Set<Socket>();

  const boot = (id?: string) => {
    const { company } = store.createCompany({ name: 'Sandbox Company', apiKey: firstKey, id });
    if (seedReviews > 0) seedCompany(store, company, seedReviews, seed);
    return company.id;
  };
  const companyId = boot();

  const app = Fastify({
    // Request logs would drown a test run; failures are logged through options.log below.
    logger: false,
    // Hung requests must not keep close() waiting.
    forceCloseConnections: true,
    bodyLimit: 64 * 1024 * 1024,
  });

  // An empty JSON body reads as no body, so body validation can say what is missing.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) => {
    if (body === '') return done(null, undefined);
    try {
      done(null, JSON.parse(body as string));
    } catch {
      done(new SandboxError(400, 'body is not valid JSON'), undefined);
    }
  });

  app.setErrorHandler((error: FastifyError | SandboxError, request, reply) => {
    if (error instanceof SandboxError) return reply.code(error.status).send({ error: error.message });
    const status = error.statusCode ?? 500;
    if (status < 500) return reply.code(status).send({ error: error.message });
    options.log?.error({ err: error, url: request.url }, 'sandbox request failed');
    return reply.code(500).send({ error: 'Internal server error' });
  });
  app.setNotFoundHandler((_request, reply) => reply.code(404).send({ error: 'Not found' }));

  app.addHook('onResponse', async (request, reply) => {
    // A late answer was counted when it was held: the client may be gone before it is sent.
    if (request.url.startsWith(PARTNER_PREFIX) && request.lateAnswerMs === undefined) {
      requests.add(request, String(reply.statusCode));
    }
  });

  await app.register(partnerRoutes, {
    prefix: PARTNER_PREFIX,
    store,
    faults,
    allowHttpWebhooks: options.allowHttpWebhooks ?? false,
    hung,
    countHang: (request) => requests.add(request, 'hang'),
    countLate: (request, status) => requests.add(request, `${status} late`),
  });
  await app.register(controlRoutes, {
    prefix: CONTROL_PREFIX,
    store,
    faults,
    defaultSeed: seed,
    requests: () => requests.snapshot(),
    reset: () => {
      deliverer.cancelAll();
      faults.set({});
      requests.clear();
      store.clear();
      boot(companyId);
    },
  });

  const host = options.host ?? '127.0.0.1';
  await app.listen({ host, port: options.port ?? 0 });
  const address = app.server.address();
  const port = typeof address === 'object' && address !== null ? address.port : options.port;
  const urlHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;

  let closing: Promise<void> | undefined;
  return {
    url: `http://${urlHost}:${port}`,
    apiKey: firstKey,
    companyId,
    close() {
      closing ??= (async () => {
        for (const socket of hung) socket.destroy();
        await deliverer.close();
        await app.close();
      })();
      return closing;
    },
  };
}
