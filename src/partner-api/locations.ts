import type { HttpClient } from './http.js';
import { type Location, locationPageSchema, locationSchema } from './locationsSchema.js';
import { continuationOf, type Page, paginate } from './paginate.js';
import type { ResourceOptions } from './resourceOptions.js';

const LIST_ROUTE = 'GET /locations';

export interface LocationsApi {
  /** The active (or the inactive) locations from `cursor` (null: the first page). */
  pages(active: boolean, cursor: string | null, signal?: AbortSignal): AsyncGenerator<Page<Location>>;
  get(slug: string, signal?: AbortSignal): Promise<Location>;
}

export function makeLocationsApi(http: HttpClient, options: ResourceOptions): LocationsApi {
  return {
    pages: (active, cursor, signal) =>
      paginate<Location>(
        async (c, s) => {
          const body = await http.request('GET', '/locations', {
            query: { limit: options.pageSize, active: String(active), cursor: c },
            route: LIST_ROUTE,
            schema: locationPageSchema,
            signal: s,
          });
          const nextCursor = continuationOf(body.pagination, LIST_ROUTE);
          return { items: body.locations, nextCursor, receivedAt: new Date() };
        },
        cursor,
        { signal, route: LIST_ROUTE, maxPages: options.maxPagesPerWalk, idOf: (l) => l.id, log: http.log },
      ),
    get: (slug, signal) =>
      http.request('GET', `/locations/${encodeURIComponent(slug)}`, {
        route: 'GET /locations/:slug',
        schema: locationSchema,
        signal,
      }),
  };
}
