import type { HttpClient } from './http.js';
import { continuationOf, type Page, paginate } from './paginate.js';
import {
  type Professional,
  type ProfessionalListItem,
  professionalPageSchema,
  professionalSchema,
} from './professionalsSchema.js';
import type { ResourceOptions } from './resourceOptions.js';

const LIST_ROUTE = 'GET /professionals';

export interface ProfessionalsApi {
  /** The active (or the inactive) professionals from `cursor`, as listed (no `location_id`). */
  pages(
    active: boolean,
    cursor: string | null,
    signal?: AbortSignal,
  ): AsyncGenerator<Page<ProfessionalListItem>>;
  /** The single read: the only response carrying `location_id`. */
  get(slug: string, signal?: AbortSignal): Promise<Professional>;
}

export function makeProfessionalsApi(http: HttpClient, options: ResourceOptions): ProfessionalsApi {
  return {
    pages: (active, cursor, signal) =>
      paginate<ProfessionalListItem>(
        async (c, s) => {
          const body = await http.request('GET', '/professionals', {
            query: { limit: options.pageSize, active: String(active), cursor: c },
            route: LIST_ROUTE,
            schema: professionalPageSchema,
            signal: s,
          });
          const nextCursor = continuationOf(body.pagination, LIST_ROUTE);
          return { items: body.professionals, nextCursor, receivedAt: new Date() };
        },
        cursor,
        { signal, route: LIST_ROUTE, maxPages: options.maxPagesPerWalk, idOf: (p) => p.id, log: http.log },
      ),
    get: (slug, signal) =>
      http.request('GET', `/professionals/${encodeURIComponent(slug)}`, {
        route: 'GET /professionals/:slug',
        schema: professionalSchema,
        signal,
      }),
  };
}
