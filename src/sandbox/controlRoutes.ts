import type { FastifyInstance } from 'fastify';
import type { FaultPlan } from './faults.js';
import { companyBody, faultsBody, keyBody, parseBody, reviewsBody, seedBody } from './schema.js';
import { seedCompany } from './seed.js';
import { reviewJson, reviewTruthJson, type Store, truthJson } from './store.js';

export interface RequestCounts {
  total: number;
  by_route: Record<string, Record<string, number>>;
}

export interface ControlRoutesOptions {
  store: Store;
  faults: FaultPlan;
  requests: () => RequestCounts;
  /** Back to the start-up state: the first company with the same key and its seeded reviews. */
  reset: () => void;
  defaultSeed: number;
}

/** One line per route, served at GET /_sandbox so the control API documents itself. */
const ROUTES = [
  'POST /_sandbox/companies {name?, api_key?} -> 201 {company_id, api_key}',
  'POST /_sandbox/companies/:companyId/keys {api_key?} -> 201 {api_key}',
  'POST /_sandbox/keys/:key/deactivate | /activate -> 200',
  'POST /_sandbox/companies/:companyId/reviews {reviews: [...]} -> 201 {reviews}',
  'POST /_sandbox/companies/:companyId/seed {count, seed?} -> 201 {count}',
  'POST /_sandbox/reviews/:id/suppress | /unsuppress -> 200 {review}',
  'POST /_sandbox/companies/:companyId/locations/:slug/activate | /deactivate -> 200 {slug, active}',
  'POST /_sandbox/companies/:companyId/professionals/:slug/activate | /deactivate -> 200 {slug, active}',
  'GET /_sandbox/companies/:companyId/truth -> everything about the company',
  'GET /_sandbox/companies/:companyId/truth/reviews?visible=true -> {reviews}',
  'GET /_sandbox/requests -> {total, by_route}',
  'GET /_sandbox/faults, PUT /_sandbox/faults {partner?, webhooks?} -> 200',
  'POST /_sandbox/reset -> 200',
];

/** The control API under /_sandbox: no auth, never subject to faults, not counted in /requests. */
export async function controlRoutes(app: FastifyInstance, options: ControlRoutesOptions): Promise<void> {
  const { store, faults } = options;

  app.get('/', async () => ({ routes: ROUTES }));

  app.post('/companies', async (request, reply) => {
    const input = parseBody(companyBody, request.body ?? {});
    const { company, apiKey } = store.createCompany({ name: input.name, apiKey: input.api_key });
    return reply.code(201).send({ company_id: company.id, api_key: apiKey });
  });

  app.post('/companies/:companyId/keys', async (request, reply) => {
    const { companyId } = request.params as { companyId: string };
    const input = parseBody(keyBody, request.body ?? {});
    return reply.code(201).send({ api_key: store.addKey(companyId, input.api_key) });
  });

  for (const [action, active] of [
    ['deactivate', false],
    ['activate', true],
  ] as const) {
    app.post(`/keys/:key/${action}`, async (request) => {
      const { key } = request.params as { key: string };
      store.setKeyActive(key, active);
      return { api_key: key, active };
    });
  }

  app.post('/companies/:companyId/reviews', async (request, reply) => {
    const { companyId } = request.params as { companyId: string };
    const input = parseBody(reviewsBody, request.body);
    const reviews = store.submitReviews(companyId, input.reviews);
    return reply.code(201).send({ reviews: reviews.map(reviewJson) });
  });

  app.post('/companies/:companyId/seed', async (request, reply) => {
    const { companyId } = request.params as { companyId: string };
    const input = parseBody(seedBody, request.body);
    seedCompany(store, store.company(companyId), input.count, input.seed ?? options.defaultSeed);
    return reply.code(201).send({ count: input.count });
  });

  for (const [action, suppressed] of [
    ['suppress', true],
    ['unsuppress', false],
  ] as const) {
    app.post(`/reviews/:id/${action}`, async (request) => {
      const { id } = request.params as { id: string };
      return { review: reviewTruthJson(store.setSuppressed(id, suppressed)) };
    });
  }

  for (const kind of ['locations', 'professionals'] as const) {
    for (const [action, active] of [
      ['deactivate', false],
      ['activate', true],
    ] as const) {
      app.post(`/companies/:companyId/${kind}/:slug/${action}`, async (request) => {
        const { companyId, slug } = request.params as { companyId: string; slug: string };
        store.setDirectoryActive(store.company(companyId), kind, slug, active);
        return { slug, active };
      });
    }
  }

  app.get('/companies/:companyId/truth', async (request) => {
    const { companyId } = request.params as { companyId: string };
    return truthJson(store.company(companyId), store.now());
  });

  app.get('/companies/:companyId/truth/reviews', async (request) => {
    const { companyId } = request.params as { companyId: string };
    const { visible } = request.query as { visible?: string };
    const company = store.company(companyId);
    const reviews = visible === 'true' ? company.visible.items : company.all.items;
    return { reviews: reviews.map(reviewTruthJson) };
  });

  app.get('/requests', async () => options.requests());

  app.get('/faults', async () => faults.current);

  app.put('/faults', async (request) => {
    faults.set(parseBody(faultsBody, request.body ?? {}));
    return faults.current;
  });

  app.post('/reset', async () => {
    options.reset();
    return { reset: true };
  });
}
