import { directoryPages } from './directoryPages.js';
import type { HttpClient } from './http.js';
import { type Location, locationPageSchema, locationSchema } from './locationsSchema.js';
import type { Page } from './paginate.js';
import type { ResourceOptions } from './resourceOptions.js';

export interface LocationsApi {
  /** The active (or the inactive) locations from `cursor` (null: the first page). */
  pages(active: boolean, cursor: string | null, signal?: AbortSignal): AsyncGenerator<Page<Location>>;
  get(slug: string, signal?: AbortSignal): Promise<Location>;
}

export function makeLocationsApi(http: HttpClient, options: ResourceOptions): LocationsApi {
  return {
    pages: (active, cursor, signal) =>
      directoryPages(
        http,
        options,
        { path: '/locations', key: 'locations', schema: locationPageSchema },
        active,
        cursor,
        signal,
      ),
    get: (slug, signal) =>
      http.request('GET', `/locations/${encodeURIComponent(slug)}`, {
        route: 'GET /locations/:slug',
        schema: locationSchema,
        signal,
      }),
  };
}
