import { type CheckedRecord, directoryPages, readDirectoryRecord } from './directoryPages.js';
import type { HttpClient } from './http.js';
import { type Location, locationPageSchema, locationSchema } from './locationsSchema.js';
import type { Page } from './paginate.js';
import type { ResourceOptions } from './resourceOptions.js';

export interface LocationsApi {
  /** The active (or the inactive) locations from `cursor` (null: the first page). */
  pages(active: boolean, cursor: string | null, signal?: AbortSignal): AsyncGenerator<Page<Location>>;
  get(slug: string, signal?: AbortSignal): Promise<Location>;
  /** The same read for the mirror: a record failing its schema comes back as its rejection. */
  read(slug: string, signal?: AbortSignal): Promise<CheckedRecord<Location>>;
  /**
   * Creates a location (spec 4.4). Never retried by the transport: a lost answer is resolved by
   * the caller reading the slug back, not by sending the request again.
   */
  create(body: NewLocation, signal?: AbortSignal): Promise<Location>;
}

/** The body of POST /locations, in the API's own field names. */
export interface NewLocation {
  readonly name: string;
  readonly slug: string;
  readonly address_1?: string | undefined;
  readonly address_2?: string | undefined;
  readonly city?: string | undefined;
  readonly state?: string | undefined;
  readonly zip?: string | undefined;
  readonly active?: boolean | undefined;
}

const SINGLE_ROUTE = 'GET /locations/:slug';

export function makeLocationsApi(http: HttpClient, options: ResourceOptions): LocationsApi {
  return {
    pages: (active, cursor, signal) =>
      directoryPages(
        http,
        options,
        { path: '/locations', key: 'locations', schema: locationPageSchema, record: locationSchema },
        active,
        cursor,
        signal,
      ),
    get: (slug, signal) =>
      http.request('GET', `/locations/${encodeURIComponent(slug)}`, {
        route: SINGLE_ROUTE,
        schema: locationSchema,
        // `200 {"error": …}` is no record: failed with the platform's words, not as a bad schema.
        refusalInBody: true,
        signal,
      }),
    read: (slug, signal) =>
      readDirectoryRecord(
        http,
        `/locations/${encodeURIComponent(slug)}`,
        SINGLE_ROUTE,
        locationSchema,
        signal,
      ),
    create: (body, signal) =>
      http.request('POST', '/locations', { body, schema: locationSchema, idempotent: false, signal }),
  };
}
