import type { z } from 'zod';
import type { HttpClient } from './http.js';
import { continuationOf, type Page, paginate } from './paginate.js';
import type { Pagination } from './paginationSchema.js';
import type { ResourceOptions } from './resourceOptions.js';

/**
 * The listing of a directory resource (spec 4.4, 4.5): active or inactive records, page by page,
 * its records under the resource's own key (`locations`, `professionals`).
 */
export function directoryPages<K extends string, T extends { id: string | number }>(
  http: HttpClient,
  options: ResourceOptions,
  list: { path: `/${K}`; key: K; schema: z.ZodType<Record<K, T[]> & { pagination: Pagination }> },
  active: boolean,
  cursor: string | null,
  signal?: AbortSignal,
): AsyncGenerator<Page<T>> {
  const route = `GET ${list.path}`;
  return paginate<T>(
    async (c, s) => {
      const body = await http.request('GET', list.path, {
        query: { limit: options.pageSize, active: String(active), cursor: c },
        route,
        schema: list.schema,
        signal: s,
      });
      return {
        items: body[list.key],
        nextCursor: continuationOf(body.pagination, route),
        receivedAt: new Date(),
      };
    },
    cursor,
    { signal, route, maxPages: options.maxPagesPerWalk, idOf: (r) => r.id, log: http.log },
  );
}
