import type { HttpClient } from './http.js';
import { type Page, pageOf, paginate } from './paginate.js';
import type { ResourceOptions } from './resourceOptions.js';
import { type Review, reviewPageSchema, reviewRecord } from './reviewsSchema.js';

const ROUTE = 'GET /reviews';

export interface ReviewsApi {
  /** One page of the review feed (spec 4.3), newest first. */
  page(params: { since: Date | null; cursor: string | null }, signal?: AbortSignal): Promise<Page<Review>>;
  /**
   * The review feed from `cursor` (null: the newest) down to `since` (null: the oldest).
   * `checkpointed`: the walk keeps its cursors in a checkpoint, so one no checkpoint can hold fails it.
   */
  pages(
    since: Date | null,
    cursor: string | null,
    signal?: AbortSignal,
    options?: { readonly checkpointed: boolean },
  ): AsyncGenerator<Page<Review>>;
}

export function makeReviewsApi(http: HttpClient, options: ResourceOptions): ReviewsApi {
  const page: ReviewsApi['page'] = async ({ since, cursor }, signal) => {
    const body = await http.request('GET', '/reviews', {
      query: { limit: options.pageSize, since: since?.toISOString(), cursor },
      route: ROUTE,
      schema: reviewPageSchema,
      signal,
    });
    return pageOf(body.reviews, body.pagination, reviewRecord, {
      route: ROUTE,
      field: 'reviews',
      limit: options.pageSize,
    });
  };
  return {
    page,
    pages: (since, cursor, signal, pagesOptions) =>
      paginate<Review>((c, s) => page({ since, cursor: c }, s), cursor, {
        signal,
        route: ROUTE,
        maxPages: options.maxPagesPerWalk,
        idOf: (r) => r.id,
        log: http.log,
        checkpointed: pagesOptions?.checkpointed ?? false,
      }),
  };
}
